from datetime import UTC, datetime
from pathlib import Path

import pytest

from runner.travel.supplier import PayloadMismatch, SupplierDatabase

NOW = datetime(2027, 3, 1, 9, tzinfo=UTC)
PAYLOAD = {"hotel_id": "H-SHIBA", "check_in": "2027-04-02", "check_out": "2027-04-06"}


def test_same_key_same_payload_returns_the_existing_hold(tmp_path: Path) -> None:
    supplier = SupplierDatabase(tmp_path / "s.sqlite")
    first = supplier.hold("k1", "t", PAYLOAD, NOW)
    again = supplier.hold("k1", "t", dict(PAYLOAD), NOW)
    assert first.created and not again.created and again.hold_id == first.hold_id
    assert supplier.active_holds() == 1
    supplier.close()


def test_same_key_other_payload_is_refused_with_no_side_effect(tmp_path: Path) -> None:
    supplier = SupplierDatabase(tmp_path / "s.sqlite")
    supplier.hold("k1", "t", PAYLOAD, NOW)
    with pytest.raises(PayloadMismatch):
        supplier.hold("k1", "t", {**PAYLOAD, "check_out": "2027-04-09"}, NOW)
    assert supplier.active_holds() == 1
    assert supplier.find("k1") == "HOLD-0001"
    supplier.close()


def test_state_outlives_the_connection(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    supplier = SupplierDatabase(path)
    supplier.hold("k1", "t", PAYLOAD, NOW)
    assert supplier.receive("hold_room") == 1
    supplier.close()
    reopened = SupplierDatabase(path)
    assert reopened.find("k1") == "HOLD-0001" and reopened.find("k2") is None
    assert reopened.receive("hold_room") == 2
    reopened.close()

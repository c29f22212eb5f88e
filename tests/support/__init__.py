"""Helpers the tests share: doubles, servers, drivers played in subprocesses, builders. No test
module imports another; what two of them need lives here."""

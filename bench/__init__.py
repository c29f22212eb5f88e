"""`make bench`: the runner's own cost, measured against its floors in one process."""

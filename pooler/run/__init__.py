"""How a plan runs: executor, scheduler, calls, journal, tables, answer."""

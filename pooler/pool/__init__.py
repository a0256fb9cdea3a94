"""What a pool is, and how it is read, checked and compiled into a plan."""

"""The run's report: an HTML page with a timeline, and JUnit XML, made from the journal."""

"""The run's report: an HTML page with a timeline, and JUnit XML, made from the journal; and what
monitoring reads of a run: a Prometheus metrics file and OpenTelemetry traces."""

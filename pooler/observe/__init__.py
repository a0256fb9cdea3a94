"""What a run shows to monitoring: a Prometheus metrics file and OpenTelemetry traces."""

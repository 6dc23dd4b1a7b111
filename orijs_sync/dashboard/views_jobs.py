"""Jobs of a state and a job's page."""

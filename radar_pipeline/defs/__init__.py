"""The Dagster shell: partitions, assets and ops, checks, sensors, schedules, resources."""

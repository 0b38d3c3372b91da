"""The Dagster shell, one folder per area (registry, collection, cleanup, evidence, history).

A file's name says its role, and a role file holds only that role's Dagster objects:
`assets.py` assets (and the ops of a graph asset), `checks.py` asset checks, `jobs.py` jobs
(and the ops of an op job), `schedules.py` schedules, `sensors.py` sensors, `partitions.py`
partitions definitions, `resources.py` resources, and `definitions.py` the area's
`dg.Definitions`, which wires the area's objects and nothing else. Every other module is a
helper of its area (run config, metadata, launchers, the instance's bootstrap) and defines no
Dagster object. radar_pipeline_tests/test_layout.py holds the rule.
"""

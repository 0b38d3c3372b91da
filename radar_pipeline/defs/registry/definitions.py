"""The registry area wired: the Source Registry as an external asset, its check, and the
sensor that observes it and keeps the `sources` partitions equal to its valid Sources."""

import dagster as dg

from radar_pipeline.defs.registry.assets import source_registry
from radar_pipeline.defs.registry.checks import registry_check
from radar_pipeline.defs.registry.sensors import source_registry_sensor

defs = dg.Definitions(
    assets=[source_registry],
    asset_checks=[registry_check],
    sensors=[source_registry_sensor],
)

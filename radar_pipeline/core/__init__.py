"""The domain: registry, acquisition, parsing, identity, vault and store. No Dagster here."""

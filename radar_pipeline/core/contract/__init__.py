"""The outside contract as pydantic models: every JSON object a `radar ... --json` command
prints, the collection report DuckDB stores and Dagster shows, and the evidence snapshot.

One set of models, one spelling of each key (camelCase aliases generated from the field
names), one vocabulary of outcomes (`outcomes.py`). The JSON Schema of every command's output
is generated from these models and committed under docs/schema/ (docs/architecture.md, "The
contract models").
The package sits at the bottom of core/ (beside the base modules): it imports nothing of the
stages, so the store, the stages, the shell and the CLI all build the same models.
"""

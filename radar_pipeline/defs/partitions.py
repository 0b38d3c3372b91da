"""One dynamic partition per valid Source; the registry sensor keeps them equal.

Partition order is insertion order, and it matters: a run covers one contiguous range of it,
and the due rule's waves are cut along it (core/plan/waves). New keys are added in the order
the caller passes (`new_partition_order`: by cadence, then id), after every existing key.
Existing keys are never deleted and re-added to reorder them, which would drop their history:
a registry that grew out of that order costs more blocks, not a rewrite."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import dagster as dg
import filelock

SOURCES_PARTITIONS_NAME = "sources"
sources_partitions = dg.DynamicPartitionsDefinition(name=SOURCES_PARTITIONS_NAME)


def sync_partition_requests(
    existing: list[str], valid: list[str]
) -> list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest]:
    """Requests that make the `sources` partitions equal to the valid Source ids; new keys
    are added in the order of `valid`."""
    requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
    to_add = [s for s in valid if s not in set(existing)]
    to_delete = [s for s in existing if s not in set(valid)]
    if to_add:
        requests.append(sources_partitions.build_add_request(to_add))
    if to_delete:
        requests.append(sources_partitions.build_delete_request(to_delete))
    return requests


def sync_partitions(instance: dg.DagsterInstance, valid: list[str]) -> list[str]:
    """Apply the same change directly (the CLI, before it launches a run); returns the keys.

    Serialised across processes by a lock file in the instance's home: two collections
    starting together would otherwise both add the same keys (a UNIQUE violation).
    """
    with filelock.FileLock(Path(instance.root_directory) / ".radar-partitions.lock"):
        existing = list(instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
        to_add = [s for s in valid if s not in set(existing)]
        to_delete = [s for s in existing if s not in set(valid)]
        if to_add:
            instance.add_dynamic_partitions(SOURCES_PARTITIONS_NAME, to_add)
        for key in to_delete:
            instance.delete_dynamic_partition(SOURCES_PARTITIONS_NAME, key)
        return list(instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))


def partition_blocks(keys: Sequence[str], checked: Sequence[str]) -> list[list[str]]:
    """The Sources to check as contiguous blocks of the partition order, the block holding
    the most urgent Source (first in `checked`, recovery priority order) first. The one
    planning of blocks: `radar collect` and the collection schedule both split by it."""
    position = {key: n for n, key in enumerate(keys)}
    blocks: list[list[str]] = []
    for key in sorted(checked, key=position.__getitem__):
        if blocks and position[blocks[-1][-1]] == position[key] - 1:
            blocks[-1].append(key)
        else:
            blocks.append([key])
    urgency = {sid: n for n, sid in enumerate(checked)}
    return sorted(blocks, key=lambda block: min(urgency[s] for s in block))

"""`make bench`: Radar against a loopback feed farm and the naive feedparser loop it replaces."""

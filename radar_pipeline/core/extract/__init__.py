"""Page extraction: the article text of a `fullText: page-extraction` Source's new Signals,
fetched under its policy (budget, robots.txt, per-host interval, stop rule) into Temporary
Content only."""

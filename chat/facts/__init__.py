"""Facts: short statements about the user distilled from their own words, as derived nodes (paper, VII-C).

A fact is a message of role `fact` in the owner's facts thread, with a `fact`
edge from each message it was drawn from (so it is in Dep of each source and
leaves with them), and a `Fact` row naming its subject (never text). Where
each step lives: `rules` (the offline extractor), `model` (the extractor with
a configured model), `extract` (a message's facts, stored through the writer),
`supersession` (which facts are current), `rederive` (a fact rebuilt from its
surviving sources after a deletion), `tasks` (the worker's passes), `views`
(`/api/facts/`). docs/subsystems/facts.md has the design.
"""

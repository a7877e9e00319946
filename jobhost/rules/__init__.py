"""The firing rules: pure decisions about what runs, shared by the loop and operator commands.

Which due occurrence runs and what is recorded for the others (:mod:`.plan`), a job's lease and
overlap policy (:mod:`.policy`), and both as the store's claim asks for them (:mod:`.claiming`).
No clock and no SQL here: the store reads and writes, these modules decide.
"""

"""The firing loop: claim due occurrences, run them in a bounded pool, renew leases."""

"""How long before an occurrence a host claims it: twice its slowest recent claim, bounded."""

from __future__ import annotations

from datetime import timedelta

from jobhost.firing.tick import CAP, FLOOR, ClaimLead


def test_the_lead_follows_the_slowest_recent_claim_within_its_bounds() -> None:
    lead = ClaimLead()
    assert lead.lead == timedelta(seconds=FLOOR), "before any claim"

    lead.took(0.001)
    assert lead.lead == timedelta(seconds=FLOOR), "a fast claim needs no more than the least"
    lead.took(0.012)
    lead.took(0.004)
    assert lead.lead == timedelta(seconds=0.024), "twice the slowest"
    lead.took(3.0)
    assert lead.lead == timedelta(seconds=CAP), "never more than the most"

    for _ in range(16):
        lead.took(0.004)
    assert lead.lead == timedelta(seconds=0.008), "a slow claim is forgotten after 16 more"

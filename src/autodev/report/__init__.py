"""``autodev report``: what a run did, what it cost and where the time went, as one self-contained HTML page
made from the ledger and the evidence files alone (``data`` gathers, ``page`` renders, ``writer`` writes)."""

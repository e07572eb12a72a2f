"""Documents against the evidence: which row each printed number speaks of (phrase indexes,
attribution), the judgement of each number, and the claim-level delivery-gate checks."""

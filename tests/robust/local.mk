# tests/robust/local.mk: hostile guests, storage faults, crashes and churn.

-- idemgen migration 00001, down: drops the idempotency_keys table and its sequence.

DROP TABLE IF EXISTS idempotency_keys;
DROP SEQUENCE IF EXISTS idempotency_lease_token_seq;

-- idemgen migration 00001, down: drops the idempotency_keys table.

DROP TABLE IF EXISTS idempotency_keys;

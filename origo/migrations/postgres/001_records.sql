-- Download records (origo/src/record-pg.ts): the same content as origo's SQLite table
-- (origo/src/records.ts): every field of a downloadRecord, the per-proxy shares as JSON, the
-- reporting client and the time origo received it. row_bytes is the row's estimate against
-- --max-record-bytes (recordBytes() in records.ts, the SQLite store's measure).
CREATE TABLE mutp_records (
  id                 bigint           GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  received_at        timestamptz      NOT NULL,
  client_id          text             NOT NULL,
  url                text             NOT NULL,
  mode               text             NOT NULL,
  scheduler          text,
  sources            integer          NOT NULL,
  bytes              bigint           NOT NULL,
  duration_ms        double precision NOT NULL,
  goodput_bps        double precision NOT NULL,
  normalized_goodput double precision NOT NULL,
  status             text             NOT NULL,
  error              text,
  proxies            jsonb            NOT NULL,
  row_bytes          integer          NOT NULL
);

-- GET /v1/records?mode=...: newest first within a mode.
CREATE INDEX mutp_records_mode_id ON mutp_records (mode, id);

-- The sum of row_bytes, one row, kept by the statements that insert and prune (so the byte cap
-- never needs a scan of the table).
CREATE TABLE mutp_records_usage (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  bytes     bigint  NOT NULL
);
INSERT INTO mutp_records_usage (bytes) VALUES (0);

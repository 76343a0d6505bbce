-- `hermes-gateway storage copy`: where a copy into this database has got to, one row per table,
-- written in the same transaction as each batch of rows it counts, so a copy killed at any point
-- resumes exactly where the database says it stopped (no row twice, none missed). `source` is
-- the source's URL without its password: a resume continues only the same source.

CREATE TABLE hermes_copy_progress (
    table_name TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    last_key TEXT,
    rows_copied BIGINT NOT NULL DEFAULT 0,
    done BIGINT NOT NULL DEFAULT 0,
    updated_at DOUBLE PRECISION NOT NULL
);

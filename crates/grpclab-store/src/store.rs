//! The results store: one table of runs in SQLite (a file, no setup) or PostgreSQL (shared by
//! a team), the same SQL for both. Each run is one row: what identifies it (time, command,
//! target, implementation, scenario, settings, machine, version), its headline figures as
//! columns, and the whole result as JSON beside them so any past run can be rendered again.
//!
//! Migrations are numbered; a database records the ones applied in `grpclab_migrations`, and
//! opening it applies the rest inside one transaction that holds the database's write lock
//! (SQLite: `BEGIN IMMEDIATE`; PostgreSQL: an advisory lock), so two runs starting at once
//! never apply one twice.

use std::path::Path;
use std::time::Duration;

use super::location::Backend;
use super::postgres_tls;
use super::postgres_tls::postgres_message;
use super::{Filter, NewRun, StoredRun};

/// How long a writer waits for another's lock (two runs finishing at once) before it gives
/// up with a warning.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// How long to wait for a PostgreSQL server that does not answer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The schema, one step per version. `{id}` is the auto-numbered key of each dialect.
/// A step is never edited once released: a change is a new step.
const MIGRATIONS: [&str; 1] = [r#"
CREATE TABLE runs (
    id {id},
    started_at TEXT NOT NULL,
    started_unix_ms BIGINT NOT NULL,
    command TEXT NOT NULL,
    batch TEXT NOT NULL,
    target TEXT NOT NULL,
    implementation TEXT NOT NULL,
    scenario TEXT NOT NULL,
    config_key TEXT NOT NULL,
    settings TEXT NOT NULL,
    tags TEXT NOT NULL,
    status TEXT NOT NULL,
    machine_host TEXT NOT NULL,
    machine_cores BIGINT NOT NULL,
    machine_model TEXT NOT NULL,
    machine_kernel TEXT NOT NULL,
    grpclab_version TEXT NOT NULL,
    git_commit TEXT NOT NULL,
    source TEXT NOT NULL,
    calls BIGINT,
    errors BIGINT,
    rps DOUBLE PRECISION,
    p50_ns BIGINT,
    p90_ns BIGINT,
    p99_ns BIGINT,
    p999_ns BIGINT,
    server_cpu_percent DOUBLE PRECISION,
    server_memory_bytes BIGINT,
    cpu_ns_per_call DOUBLE PRECISION,
    capacity_rps DOUBLE PRECISION,
    result_kind TEXT NOT NULL,
    result TEXT NOT NULL
);
CREATE INDEX runs_by_config ON runs (config_key, started_unix_ms);
CREATE INDEX runs_by_time ON runs (started_unix_ms);
"#];

/// The columns of a listed run, in [`StoredRun`]'s order (the result is read apart: a list
/// need not carry every histogram).
const COLUMNS: &str = "id, started_at, started_unix_ms, command, batch, target, implementation, \
    scenario, config_key, settings, tags, status, machine_host, machine_cores, machine_model, \
    machine_kernel, grpclab_version, git_commit, source, calls, errors, rps, p50_ns, p90_ns, \
    p99_ns, p999_ns, server_cpu_percent, server_memory_bytes, cpu_ns_per_call, capacity_rps, \
    result_kind";

/// A value bound to a statement, the same for both databases.
#[derive(Debug, Clone)]
enum Value {
    Int(Option<i64>),
    Real(Option<f64>),
    Text(String),
}

/// An open store.
pub struct Store {
    connection: Connection,
}

enum Connection {
    Sqlite(rusqlite::Connection),
    Postgres(postgres::Client),
}

/// What went wrong with the store. Texts are the drivers' own; [`Store::open`] returns them
/// with the password taken out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The store could not be reached: its folder not created, its file not opened, its
    /// server not connected to (TLS included).
    #[error("{0}")]
    Unreachable(String),
    /// The database refused a statement (or its driver failed).
    #[error("{0}")]
    Refused(String),
    /// The store's schema is past the versions this grpclab knows.
    #[error("it was written by a newer grpclab (schema version {applied}; this grpclab knows up to {known}): upgrade grpclab, or give another --history")]
    Newer {
        /// The schema version the store is at.
        applied: i64,
        /// The last version this grpclab knows.
        known: i64,
    },
}

impl StoreError {
    /// The same error with `backend`'s password taken out of its text.
    pub fn redacted(self, backend: &Backend) -> StoreError {
        match self {
            StoreError::Unreachable(text) => StoreError::Unreachable(backend.redact(&text)),
            StoreError::Refused(text) => StoreError::Refused(backend.redact(&text)),
            newer @ StoreError::Newer { .. } => newer,
        }
    }
}

impl Store {
    /// Opens (and, on first use, creates) the store and brings its schema up to date.
    pub fn open(backend: &Backend) -> Result<Store, StoreError> {
        let connection = match backend {
            Backend::Sqlite(path) => Connection::Sqlite(open_sqlite(path)?),
            Backend::Postgres(target) => {
                let mut config = target.config.clone();
                config.connect_timeout(CONNECT_TIMEOUT);
                if config.get_application_name().is_none() {
                    config.application_name("grpclab");
                }
                let tls = postgres_tls::connector(target).map_err(StoreError::Unreachable)?;
                let client = config.connect(tls).map_err(|err| {
                    StoreError::Unreachable(backend.redact(&postgres_tls::explain(target, &err)))
                })?;
                Connection::Postgres(client)
            }
        };
        let mut store = Store { connection };
        store.migrate().map_err(|err| err.redacted(backend))?;
        Ok(store)
    }

    /// The schema version the store is at.
    pub fn version(&mut self) -> Result<i64, StoreError> {
        let rows = self.query(
            "SELECT COALESCE(MAX(version), 0) FROM grpclab_migrations",
            &[],
            |row| row.int(0).unwrap_or(0),
        )?;
        Ok(rows.into_iter().next().unwrap_or(0))
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        let create = "CREATE TABLE IF NOT EXISTS grpclab_migrations (version BIGINT PRIMARY KEY, applied_at TEXT NOT NULL)";
        let now = super::now_rfc3339();
        match &mut self.connection {
            Connection::Sqlite(connection) => {
                let tx = connection
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(sqlite_message)?;
                tx.execute_batch(create).map_err(sqlite_message)?;
                let applied: i64 = tx
                    .query_row(
                        "SELECT COALESCE(MAX(version), 0) FROM grpclab_migrations",
                        [],
                        |row| row.get(0),
                    )
                    .map_err(sqlite_message)?;
                check_not_newer(applied)?;
                for (index, step) in MIGRATIONS.iter().enumerate() {
                    let version = index as i64 + 1;
                    if version <= applied {
                        continue;
                    }
                    tx.execute_batch(&step.replace("{id}", "INTEGER PRIMARY KEY AUTOINCREMENT"))
                        .map_err(sqlite_message)?;
                    tx.execute(
                        "INSERT INTO grpclab_migrations (version, applied_at) VALUES (?1, ?2)",
                        rusqlite::params![version, now],
                    )
                    .map_err(sqlite_message)?;
                }
                tx.commit().map_err(sqlite_message)
            }
            Connection::Postgres(client) => {
                let mut tx = client.transaction().map_err(postgres_refused)?;
                // One migrator at a time across every client of this database.
                tx.execute("SELECT pg_advisory_xact_lock(7305001)", &[])
                    .map_err(postgres_refused)?;
                tx.batch_execute(create).map_err(postgres_refused)?;
                let applied: i64 = tx
                    .query_one(
                        "SELECT COALESCE(MAX(version), 0)::BIGINT FROM grpclab_migrations",
                        &[],
                    )
                    .map_err(postgres_refused)?
                    .get(0);
                check_not_newer(applied)?;
                for (index, step) in MIGRATIONS.iter().enumerate() {
                    let version = index as i64 + 1;
                    if version <= applied {
                        continue;
                    }
                    tx.batch_execute(&step.replace("{id}", "BIGSERIAL PRIMARY KEY"))
                        .map_err(postgres_refused)?;
                    tx.execute(
                        "INSERT INTO grpclab_migrations (version, applied_at) VALUES ($1, $2)",
                        &[&version, &now],
                    )
                    .map_err(postgres_refused)?;
                }
                tx.commit().map_err(postgres_refused)
            }
        }
    }

    /// Stores runs in one transaction (all or none); returns their ids in order.
    pub fn insert(&mut self, runs: &[NewRun]) -> Result<Vec<i64>, StoreError> {
        const INSERT_COLUMNS: &str = "started_at, started_unix_ms, command, batch, target, \
            implementation, scenario, config_key, settings, tags, status, machine_host, \
            machine_cores, machine_model, machine_kernel, grpclab_version, git_commit, source, \
            calls, errors, rps, p50_ns, p90_ns, p99_ns, p999_ns, server_cpu_percent, \
            server_memory_bytes, cpu_ns_per_call, capacity_rps, result_kind, result";
        let count = INSERT_COLUMNS.split(',').count();
        let mut ids = Vec::with_capacity(runs.len());
        match &mut self.connection {
            Connection::Sqlite(connection) => {
                let tx = connection
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(sqlite_message)?;
                {
                    let marks: Vec<String> = (1..=count).map(|n| format!("?{n}")).collect();
                    let mut statement = tx
                        .prepare(&format!(
                            "INSERT INTO runs ({INSERT_COLUMNS}) VALUES ({})",
                            marks.join(", ")
                        ))
                        .map_err(sqlite_message)?;
                    for run in runs {
                        let values = values_of(run);
                        statement
                            .execute(rusqlite::params_from_iter(values.iter().map(sqlite_value)))
                            .map_err(sqlite_message)?;
                        ids.push(tx.last_insert_rowid());
                    }
                }
                tx.commit().map_err(sqlite_message)?;
            }
            Connection::Postgres(client) => {
                let mut tx = client.transaction().map_err(postgres_refused)?;
                let marks: Vec<String> = (1..=count).map(|n| format!("${n}")).collect();
                let sql = format!(
                    "INSERT INTO runs ({INSERT_COLUMNS}) VALUES ({}) RETURNING id",
                    marks.join(", ")
                );
                let statement = tx.prepare(&sql).map_err(postgres_refused)?;
                for run in runs {
                    let values = values_of(run);
                    let boxed: Vec<Box<dyn postgres::types::ToSql + Sync>> =
                        values.iter().map(postgres_value).collect();
                    let params: Vec<&(dyn postgres::types::ToSql + Sync)> =
                        boxed.iter().map(|value| value.as_ref()).collect();
                    let row = tx
                        .query_one(&statement, &params)
                        .map_err(postgres_refused)?;
                    ids.push(row.get(0));
                }
                tx.commit().map_err(postgres_refused)?;
            }
        }
        Ok(ids)
    }

    /// Runs matching `filter`, oldest first (without their full results).
    pub fn list(&mut self, filter: &Filter) -> Result<Vec<StoredRun>, StoreError> {
        let mut conditions = Vec::new();
        let mut values = Vec::new();
        let mut equal = |column: &str, value: &Option<String>, values: &mut Vec<Value>| {
            if let Some(value) = value {
                values.push(Value::Text(value.clone()));
                conditions.push(format!("{column} = {{{}}}", values.len()));
            }
        };
        equal("implementation", &filter.implementation, &mut values);
        equal("scenario", &filter.scenario, &mut values);
        equal("target", &filter.target, &mut values);
        equal("command", &filter.command, &mut values);
        equal("config_key", &filter.config_key, &mut values);
        if let Some(since) = filter.since_unix_ms {
            values.push(Value::Int(Some(since)));
            conditions.push(format!("started_unix_ms >= {{{}}}", values.len()));
        }
        if let Some(before) = filter.before_id {
            values.push(Value::Int(Some(before)));
            conditions.push(format!("id < {{{}}}", values.len()));
        }
        if let Some((key, value)) = &filter.tag {
            // Tags are a JSON object with sorted keys, written by serde_json: the pair's
            // exact text is a substring of the column.
            let needle = format!(
                "{}:{}",
                serde_json::Value::String(key.clone()),
                serde_json::Value::String(value.clone())
            );
            values.push(Value::Text(format!("%{}%", escape_like(&needle))));
            conditions.push(format!("tags LIKE {{{}}} ESCAPE '!'", values.len()));
        }
        let mut sql = format!("SELECT {COLUMNS} FROM runs");
        if !conditions.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&conditions.join(" AND "));
        }
        // The newest `limit`, shown oldest first.
        sql.push_str(" ORDER BY id DESC");
        if let Some(limit) = filter.limit {
            values.push(Value::Int(Some(limit as i64)));
            sql.push_str(&format!(" LIMIT {{{}}}", values.len()));
        }
        let mut runs = self.query(&sql, &values, stored_run)?;
        runs.reverse();
        Ok(runs)
    }

    /// One run with its full result.
    pub fn get(&mut self, id: i64) -> Result<Option<(StoredRun, String)>, StoreError> {
        let sql = format!("SELECT {COLUMNS}, result FROM runs WHERE id = {{1}}");
        let mut rows = self.query(&sql, &[Value::Int(Some(id))], |row| {
            (stored_run(row), row.text(31))
        })?;
        Ok(rows.pop())
    }

    /// Runs `sql` (placeholders written `{N}`) and maps each row.
    fn query<T>(
        &mut self,
        sql: &str,
        values: &[Value],
        map: impl Fn(&dyn Row) -> T,
    ) -> Result<Vec<T>, StoreError> {
        match &mut self.connection {
            Connection::Sqlite(connection) => {
                let sql = placeholders(sql, values.len(), "?");
                let mut statement = connection.prepare(&sql).map_err(sqlite_message)?;
                let mut rows = statement
                    .query(rusqlite::params_from_iter(values.iter().map(sqlite_value)))
                    .map_err(sqlite_message)?;
                let mut out = Vec::new();
                while let Some(row) = rows.next().map_err(sqlite_message)? {
                    out.push(map(&SqliteRow(row)));
                }
                Ok(out)
            }
            Connection::Postgres(client) => {
                let sql = placeholders(sql, values.len(), "$");
                let boxed: Vec<Box<dyn postgres::types::ToSql + Sync>> =
                    values.iter().map(postgres_value).collect();
                let params: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    boxed.iter().map(|value| value.as_ref()).collect();
                let rows = client.query(&sql, &params).map_err(postgres_refused)?;
                Ok(rows.iter().map(|row| map(&PostgresRow(row))).collect())
            }
        }
    }
}

/// `{N}` → `?N` (SQLite) or `$N` (PostgreSQL).
fn placeholders(sql: &str, count: usize, mark: &str) -> String {
    let mut out = sql.to_owned();
    // Highest first, so `{1}` never rewrites part of `{12}`.
    for n in (1..=count).rev() {
        out = out.replace(&format!("{{{n}}}"), &format!("{mark}{n}"));
    }
    out
}

/// `text` safe inside a LIKE pattern with `ESCAPE '!'`.
fn escape_like(text: &str) -> String {
    text.replace('!', "!!")
        .replace('%', "!%")
        .replace('_', "!_")
}

fn open_sqlite(path: &Path) -> Result<rusqlite::Connection, StoreError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|err| {
            StoreError::Unreachable(format!("cannot create {}: {err}", parent.display()))
        })?;
    }
    let connection =
        rusqlite::Connection::open(path).map_err(|err| StoreError::Unreachable(err.to_string()))?;
    connection.busy_timeout(LOCK_WAIT).map_err(sqlite_message)?;
    // WAL: readers never block the writer, and a process killed mid-write leaves the last
    // committed state (the log is replayed or dropped on the next open).
    connection
        .pragma_update(None, "journal_mode", "WAL")
        .map_err(sqlite_message)?;
    connection
        .pragma_update(None, "synchronous", "NORMAL")
        .map_err(sqlite_message)?;
    Ok(connection)
}

fn sqlite_message(err: rusqlite::Error) -> StoreError {
    StoreError::Refused(err.to_string())
}

fn postgres_refused(err: postgres::Error) -> StoreError {
    StoreError::Refused(postgres_message(&err))
}

/// A store whose schema is past the versions this grpclab knows was written by a newer one:
/// its rows may mean what this build cannot read, so it is neither read nor written (the
/// migration's transaction is rolled back).
fn check_not_newer(applied: i64) -> Result<(), StoreError> {
    let known = MIGRATIONS.len() as i64;
    if applied > known {
        return Err(StoreError::Newer { applied, known });
    }
    Ok(())
}

fn sqlite_value(value: &Value) -> rusqlite::types::Value {
    use rusqlite::types::Value as V;
    match value {
        Value::Int(Some(v)) => V::Integer(*v),
        Value::Real(Some(v)) => V::Real(*v),
        Value::Int(None) | Value::Real(None) => V::Null,
        Value::Text(text) => V::Text(text.clone()),
    }
}

fn postgres_value(value: &Value) -> Box<dyn postgres::types::ToSql + Sync> {
    match value {
        Value::Int(v) => Box::new(*v),
        Value::Real(v) => Box::new(*v),
        Value::Text(text) => Box::new(text.clone()),
    }
}

/// A run's values in `insert`'s column order.
fn values_of(run: &NewRun) -> Vec<Value> {
    let text = |s: &str| Value::Text(s.to_owned());
    let int = |v: Option<u64>| Value::Int(v.map(|v| v.min(i64::MAX as u64) as i64));
    let real = |v: Option<f64>| Value::Real(v.filter(|v| v.is_finite()));
    vec![
        text(&run.record.started_at),
        Value::Int(Some(run.record.started_unix_ms)),
        text(&run.record.command),
        text(&run.record.batch),
        text(&run.record.target),
        text(&run.record.implementation),
        text(&run.record.scenario),
        text(&run.record.config_key),
        text(&run.record.settings.to_string()),
        text(&serde_json::to_string(&run.record.tags).unwrap_or_else(|_| "{}".to_owned())),
        text(&run.record.status),
        text(&run.record.machine.host),
        Value::Int(Some(run.record.machine.cores as i64)),
        text(&run.record.machine.model),
        text(&run.record.machine.kernel),
        text(&run.record.version),
        text(&run.record.git_commit),
        text(&run.record.source),
        int(run.record.figures.calls),
        int(run.record.figures.errors),
        real(run.record.figures.rps),
        int(run.record.figures.p50_ns),
        int(run.record.figures.p90_ns),
        int(run.record.figures.p99_ns),
        int(run.record.figures.p999_ns),
        real(run.record.figures.server_cpu_percent),
        int(run.record.figures.server_memory_bytes),
        real(run.record.figures.cpu_ns_per_call),
        real(run.record.figures.capacity_rps),
        text(&run.record.result_kind),
        text(&run.result),
    ]
}

/// A row of either database, read by column index.
trait Row {
    fn int(&self, index: usize) -> Option<i64>;
    fn real(&self, index: usize) -> Option<f64>;
    fn text(&self, index: usize) -> String;
}

struct SqliteRow<'a>(&'a rusqlite::Row<'a>);

impl Row for SqliteRow<'_> {
    fn int(&self, index: usize) -> Option<i64> {
        self.0.get::<_, Option<i64>>(index).ok().flatten()
    }
    fn real(&self, index: usize) -> Option<f64> {
        self.0.get::<_, Option<f64>>(index).ok().flatten()
    }
    fn text(&self, index: usize) -> String {
        self.0
            .get::<_, Option<String>>(index)
            .ok()
            .flatten()
            .unwrap_or_default()
    }
}

struct PostgresRow<'a>(&'a postgres::Row);

impl Row for PostgresRow<'_> {
    fn int(&self, index: usize) -> Option<i64> {
        self.0.try_get::<_, Option<i64>>(index).ok().flatten()
    }
    fn real(&self, index: usize) -> Option<f64> {
        self.0.try_get::<_, Option<f64>>(index).ok().flatten()
    }
    fn text(&self, index: usize) -> String {
        self.0
            .try_get::<_, Option<String>>(index)
            .ok()
            .flatten()
            .unwrap_or_default()
    }
}

fn stored_run(row: &dyn Row) -> StoredRun {
    let unsigned = |index: usize| row.int(index).map(|v| v.max(0) as u64);
    StoredRun {
        id: row.int(0).unwrap_or(0),
        record: super::RunRecord {
            started_at: row.text(1),
            started_unix_ms: row.int(2).unwrap_or(0),
            command: row.text(3),
            batch: row.text(4),
            target: row.text(5),
            implementation: row.text(6),
            scenario: row.text(7),
            config_key: row.text(8),
            settings: serde_json::from_str(&row.text(9)).unwrap_or(serde_json::Value::Null),
            tags: serde_json::from_str(&row.text(10)).unwrap_or_default(),
            status: row.text(11),
            machine: super::Machine {
                host: row.text(12),
                cores: unsigned(13).unwrap_or(0),
                model: row.text(14),
                kernel: row.text(15),
            },
            version: row.text(16),
            git_commit: row.text(17),
            source: row.text(18),
            figures: super::Figures {
                calls: unsigned(19),
                errors: unsigned(20),
                rps: row.real(21),
                p50_ns: unsigned(22),
                p90_ns: unsigned(23),
                p99_ns: unsigned(24),
                p999_ns: unsigned(25),
                server_cpu_percent: row.real(26),
                server_memory_bytes: unsigned(27),
                cpu_ns_per_call: row.real(28),
                capacity_rps: row.real(29),
            },
            result_kind: row.text(30),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_for_each_database() {
        assert_eq!(
            placeholders("a = {1} AND b = {12} OR c = {2}", 12, "$"),
            "a = $1 AND b = $12 OR c = $2"
        );
        assert_eq!(placeholders("x = {1}", 1, "?"), "x = ?1");
    }

    #[test]
    fn like_patterns_match_their_text_only() {
        assert_eq!(escape_like("a_b%c!"), "a!_b!%c!!");
    }

    #[test]
    fn a_postgres_backend_never_prints_its_password() {
        let backend = super::super::location::backend_of(
            "postgres://grpclab:s3cret-pw@db.example/runs",
            None,
        )
        .expect("a URL");
        assert!(!format!("{backend:?}").contains("s3cret-pw"));
        assert_eq!(
            backend.redact("failed for postgres://grpclab:s3cret-pw@db"),
            "failed for postgres://grpclab:***@db"
        );
    }
}

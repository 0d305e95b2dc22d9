//! What a simulation run is: the server design and every parameter, the
//! paper's and the ones it leaves open (their defaults and why are in
//! `docs/design.md`, "The opportunistic-log simulator").

use serde::Serialize;

/// The four server designs of O'Toole & Shrira.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    /// Commits ship whole pages; no log, no installation reads.
    Page,
    /// Object server whose installation reads are issued at commit.
    Basic,
    /// Object server that defers installations in its log and reads, when
    /// the log is full, for the oldest entry (FIFO).
    Absorbing,
    /// Object server that defers installations and reads, when the log is
    /// full, for the entry with the shortest (age-weighted) positioning time.
    Opportunistic,
}

impl ServerKind {
    /// Every design, in the paper's order.
    pub const ALL: [ServerKind; 4] = [
        ServerKind::Page,
        ServerKind::Basic,
        ServerKind::Absorbing,
        ServerKind::Opportunistic,
    ];

    /// The name used in the JSON and the tables.
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Page => "page",
            ServerKind::Basic => "basic",
            ServerKind::Absorbing => "absorbing",
            ServerKind::Opportunistic => "opportunistic",
        }
    }

    /// Whether the server keeps an object log (and has installation reads).
    pub fn is_object_server(self) -> bool {
        self != ServerKind::Page
    }
}

/// Every parameter of a run but the device.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Params {
    /// Clients, each running one transaction after another.
    pub clients: u32,
    /// Fetches per transaction (the paper's FetchRatio).
    pub fetch_ratio: f64,
    /// Fraction of transactions that modify their object (WriteRatio).
    pub write_ratio: f64,
    /// Client think time per transaction, ms.
    pub think_ms: f64,
    /// Network latency per message, ms.
    pub latency_ms: f64,
    /// CPU per message at its sender and at its receiver, ms.
    pub message_cpu_ms: f64,
    /// Server CPU to validate a commit, ms.
    pub validation_ms: f64,
    /// Server CPU to install one modified object into its page, ms.
    pub installation_ms: f64,
    /// Bytes per page.
    pub page_bytes: u32,
    /// Pages in the database (placed from the device's first sector).
    pub database_pages: u32,
    /// Pages of non-volatile server memory: page cache plus object log.
    pub memory_pages: u32,
    /// Pages of that memory given to the object log (object servers).
    pub log_pages: u32,
    /// Log entries per page of log memory.
    pub objects_per_log_page: u32,
    /// A dirty page is written when fewer clean pages than this remain.
    pub write_trigger: u32,
    /// Age weight `w` of `T_eff = T_pos − w·T_wait` (opportunistic server).
    pub age_weight: f64,
    /// Simulated seconds before measuring.
    pub warmup_s: f64,
    /// Simulated seconds measured.
    pub measure_s: f64,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            clients: 50,
            fetch_ratio: 0.20,
            write_ratio: 0.20,
            think_ms: 200.0,
            latency_ms: 1.0,
            message_cpu_ms: 0.1,
            validation_ms: 0.1,
            installation_ms: 0.1,
            page_bytes: 4096,
            database_pages: 335_502,
            memory_pages: 35_000,
            log_pages: 1500,
            objects_per_log_page: 2,
            write_trigger: 100,
            age_weight: 0.0,
            warmup_s: 100.0,
            measure_s: 400.0,
        }
    }
}

impl Params {
    /// Sectors of 512 bytes per page.
    pub fn sectors_per_page(&self) -> u32 {
        self.page_bytes.div_ceil(512)
    }

    /// Frames of the page cache for `server`: all the memory for the page
    /// server, the memory less the log for the object servers.
    pub fn cache_pages(&self, server: ServerKind) -> u32 {
        if server.is_object_server() {
            self.memory_pages.saturating_sub(self.log_pages)
        } else {
            self.memory_pages
        }
    }

    /// Entries the log holds (object servers).
    pub fn log_entries(&self) -> usize {
        self.log_pages as usize * self.objects_per_log_page as usize
    }
}

//! White & DeWitt's published figures (`papers/003_*` §5), printed beside
//! ours: times in seconds on a SPARCstation ELC client with a server over
//! Ethernet, I/Os the client's page reads.

/// A row of the paper's cold/warm tables: version, cold s, cold I/Os, warm
/// s, warm I/Os.
pub type ColdWarm = (&'static str, f64, u32, f64, &'static str);

/// Table 1: small database, one transaction, no updates.
pub const TABLE_1: [ColdWarm; 4] = [
    ("CESM", 10.586, 325, 0.285, "2"),
    ("EPVM1", 10.655, 327, 0.180, "2"),
    ("PC1M", 11.386, 327, 0.120, "2"),
    ("OS", 12.530, 217, 0.066, "1"),
];

/// Table 2: the EPVM 2.0 versions.
pub const TABLE_2: [ColdWarm; 4] = [
    ("OC5M", 10.750, 327, 0.227, "2"),
    ("OC1M", 11.799, 434, 1.979, "171"),
    ("PC1M", 11.386, 327, 0.120, "2"),
    ("PC1M-NO", 11.384, 327, 0.136, "2"),
];

/// Table 3: hot iterations, with and without the call to `random` per
/// visit: version, hot s, hot w/o random s.
pub const TABLE_3: [(&str, f64, f64); 7] = [
    ("C", 0.039, 0.005),
    ("OS", 0.039, 0.005),
    ("PC1M", 0.058, 0.024),
    ("PC1M-NO", 0.078, 0.044),
    ("EPVM1", 0.074, 0.040),
    ("EPVM1-NO", 0.082, 0.048),
    ("CESM", 0.230, 0.196),
];

/// Table 4: small database, a transaction per iteration, no updates.
pub const TABLE_4: [ColdWarm; 4] = [
    ("CESM", 10.669, 325, 1.962, "133"),
    ("EPVM1", 10.712, 327, 2.075, "135"),
    ("PC1M", 11.430, 327, 3.669, "283"),
    ("OS", 12.734, 217, 0.404, "1"),
];

/// Table 5: large database (125,000 parts), one transaction, no updates
/// (in parentheses: page faults of the client's virtual memory).
pub const TABLE_5: [ColdWarm; 4] = [
    ("CESM", 38.643, 1093, 30.973, "909"),
    ("EPVM1", 39.582, 1149, 32.716, "928"),
    ("PC1M", 38.894, 1014, 24.180, "33 (699)"),
    ("OS", 48.614, 839, 36.567, "615"),
];

/// Table 6: the EPVM 2.0 versions on the large database.
pub const TABLE_6: [ColdWarm; 4] = [
    ("OC5M", 38.098, 1082, 23.401, "675"),
    ("OC1M", 43.107, 1516, 27.035, "988"),
    ("PC1M", 38.894, 1014, 24.180, "33 (699)"),
    ("PC1M-NO", 38.838, 1014, 22.540, "33 (705)"),
];

/// Figure 4b against 4c: objects read from disk and cached by one
/// traversal to depth 1 from the root of Figure 4a's eight parts, eager
/// swizzling upon discovery against EPVM 2.0's lazy (§3).
pub const FIGURE_4B: (u32, u32) = (8, 4);

/// What the paper concluded from each experiment, in its words where short.
pub mod said {
    pub const FIGURE_4B: &str = "eager swizzling upon discovery caches the targets of every pointer discovered, \"double the number of objects actually needed\" in Figure 4b (8 against lazy's 4); EPVM 2.0 is lazy because eager \"could result in unnecessary I/O operations\" (not measured in its tables)";
    pub const TABLE_1_COLD: &str = "CESM best, EPVM1 almost as good (OID table inserts), PC1M 7% slower than EPVM1 (copying pages), OS worst despite the fewest I/Os (mapping data)";
    pub const TABLE_1_WARM: &str = "the reverse of cold: OS much the fastest, then PC1M, EPVM1; CESM worst (a call per object)";
    pub const TABLE_2: &str = "cold: OC5M and PC1M close, OC1M slowest (it rereads pages); warm: PC1M best (2 pages cached against 1,097 objects), PC1M-NO 40% faster than OC5M, OC1M worst; swizzling 12% faster for page caching";
    pub const TABLE_6: &str = "large database: OC5M best cold and warm, OC1M worst (rereads pages from the server); page caching in between, PC1M-NO 4-7% faster than PC1M (swizzling dirtied virtual-memory pages)";
    pub const TABLE_3: &str = "OS = C; OS 33% faster than PC1M (5x without random); EPVM1 21% slower than PC1M; CESM ~3x EPVM1 and ~6x OS; swizzling: EPVM1 10% faster than EPVM1-NO";
    pub const TABLE_4: &str = "cold as in Table 1; warm: OS best (it caches pages and locks between transactions), the ESM versions must reacquire locks";
    pub const TABLE_5: &str = "large database: CESM best cold, EPVM1 a little slower (buffer management), OS worst cold; warm: OS 12% slower than EPVM1 (mapping costs)";
    pub const FIGURE_7: &str = "one transaction, p from 0 to 1: OS fastest without updates, degrading as updates are added (whole-page logging) until every page is updated; EPVM1 degrades continually (a log record per update); CESM about 7% faster than EPVM1 throughout";
    pub const FIGURE_8: &str = "a transaction per iteration: OS best at low p, degrading with p (commit cost); EPVM1 does quite well";
    pub const FIGURE_9: &str = "1 cold + N hot, read only: EPVM1 best for 1-60 hot iterations, OS beyond 60; at 1,000: OS 25% faster than PC1M, 39% than EPVM1, 76% than CESM; EPVM1 7% faster than EPVM1-NO";
    pub const FIGURE_10: &str = "1 cold + N hot, p = 0.01: EPVM1 best for 1-160, PC1M for 160-600, OS after 600 (its commit is dear); EPVM1-NO 7% slower than EPVM1 at 1,000";
    pub const FIGURE_12: &str = "large database, one transaction: OS worst in most cases, better than PC1M read-only; EPVM1 and CESM close";
    pub const FIGURE_11: &str = "one transaction, p = 0.3, the part's non-pointer data an array of 19 integers, a growing share of it updated: OS flat once any update is done (whole-page logging); the EPVM 2.0 versions change little (51 to 160 log pages: a modified range per object); EPVM1 degrades quickly (a log record per update: 171 to 3,325 log pages)";
    pub const FIGURE_13: &str = "large database, a transaction per iteration: OS worst in all cases; CESM best, slightly faster than EPVM1";
}

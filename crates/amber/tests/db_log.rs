//! Opening a database logs the fault backend chosen and why, at info level,
//! through the `log` facade (the library never prints); `Db::probe_backend`
//! predicts the same choice without a database. Its own binary: the logger
//! is process-wide.

use amber::BackendChoice;
use amber::{Db, Options};
use std::sync::Mutex;

/// Keeps every record.
struct Capture(Mutex<Vec<(log::Level, String)>>);

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, r: &log::Record<'_>) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((r.level(), r.args().to_string()));
    }

    fn flush(&self) {}
}

static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

#[test]
fn open_logs_the_backend_and_why() {
    log::set_logger(&CAPTURE).expect("the only logger");
    log::set_max_level(log::LevelFilter::Info);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    for (i, choice) in [BackendChoice::Auto, BackendChoice::Sigsegv]
        .into_iter()
        .enumerate()
    {
        let o = Options {
            backend: choice,
            ..Options::default()
        };
        let (predicted, why) = Db::probe_backend(&o).expect("probe");
        let db = if i == 0 {
            Db::create(&path, o).expect("create")
        } else {
            Db::open(&path, o).expect("open")
        };
        assert_eq!(db.backend(), predicted, "{why} / {}", db.backend_reason());
        let want = format!(
            "{}: fault backend {} ({})",
            path.display(),
            db.backend(),
            db.backend_reason()
        );
        let logged = CAPTURE.0.lock().unwrap_or_else(|e| e.into_inner());
        assert!(
            logged
                .iter()
                .any(|(l, m)| *l == log::Level::Info && *m == want),
            "{want:?} not among {logged:?}"
        );
        drop(logged);
        db.close().expect("close");
    }
}

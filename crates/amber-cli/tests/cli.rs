//! The `amber` binary end to end: the round trip of every command, damage
//! found by `verify`, and one-line errors for bad input.

use amber::internals::format::page::BlockKind;
use amber::internals::io::real::RealVfs;
use amber::internals::store::{Store, StoreOptions, wal_path};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod common;
use common::{amber, assert_error, s, serial};

fn no_close() -> StoreOptions {
    StoreOptions {
        checkpoint_on_close: false,
        ..StoreOptions::default()
    }
}

/// Commits `n` transactions to the database at `p` (each allocates a block,
/// writes into it and names it as a root), and leaves them in the log.
fn commit_some(p: &Path, n: usize) -> Vec<u64> {
    let s = Store::open(Arc::new(RealVfs), p, no_close()).expect("open");
    let ps = s.page_size() as u64;
    let mut pages = Vec::new();
    for i in 0..n {
        let mut tx = s.begin().expect("begin");
        let ty = tx.define_type(&[0xab, 0xcd, i as u8]).expect("type");
        let page = tx.alloc(1, BlockKind::Raw).expect("alloc");
        tx.write(page * ps + 100, format!("transaction {i}").as_bytes())
            .expect("write");
        tx.set_root(&format!("root{i}"), page * ps + 100, ty)
            .expect("root");
        tx.commit().expect("commit");
        pages.push(page);
    }
    drop(s); // no close, no checkpoint: the log keeps them
    pages
}

fn flip(path: &Path, off: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open for damage");
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, off).expect("read byte");
    b[0] ^= 0x5a;
    f.write_all_at(&b, off).expect("write byte");
}

fn db_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("test.amber")
}

#[test]
fn create_inspect_verify_checkpoint_recover() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_in(&dir);
    let r = amber(&["create", s(&db)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("page size 4096"), "{}", r.stdout);
    assert!(wal_path(&db).exists());
    let r = amber(&["create", s(&db)]);
    assert_error(&r, "already exists");

    let pages = commit_some(&db, 3);
    let r = amber(&["inspect", s(&db)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = &r.stdout;
    for want in [
        "copy 0: generation 1",
        "(current)",
        "base LSN 1",
        "3 alloc, 3 commit, 3 ranges, 3 root, 3 type",
        "3 committed, 0 uncommitted",
        "tail: clean",
        "pending: 3 block(s)",
        "schema catalog: 3 type(s)",
        "type 1: 3 byte(s): hex abcd00",
        "roots: 3",
        "fault backend on this machine: ",
    ] {
        assert!(out.contains(want), "inspect lacks {want:?}:\n{out}");
    }
    let root0 = format!("\"root0\": address {}:100", pages[0]);
    assert!(out.contains(&root0), "inspect lacks {root0:?}:\n{out}");

    let r = amber(&["verify", s(&db)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("no damage found"), "{}", r.stdout);
    // Storage-level types and raw blocks: nothing for the deep check to
    // follow, and it says why.
    let r = amber(&["verify", "--deep", s(&db)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("note: type id 1: its descriptor does not decode"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("deep: checked 0 pointer(s) of 0 object(s) in 6 block(s): no damage found"),
        "{}",
        r.stdout
    );

    let r = amber(&["recover", s(&db)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("3 committed"), "{}", r.stdout);
    assert!(
        r.stdout.contains("redone:        12 record(s)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("installed:     3 data block(s)"),
        "{}",
        r.stdout
    );

    let r = amber(&["inspect", s(&db)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains(": 0 record(s)"), "{}", r.stdout);
    assert!(r.stdout.contains("pending: 0 block(s)"), "{}", r.stdout);
    assert!(r.stdout.contains("roots: 3"), "{}", r.stdout);

    commit_some(&db, 1);
    let r = amber(&["checkpoint", s(&db)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("open: installed 1 data block(s)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("nothing (more) to install"),
        "{}",
        r.stdout
    );
    let r = amber(&["checkpoint", s(&db)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stdout.contains("open:"), "{}", r.stdout);

    let r = amber(&["verify", s(&db)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("checked 7 blocks"), "{}", r.stdout);
}

#[test]
fn verify_names_a_damaged_page() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_in(&dir);
    assert_eq!(amber(&["create", s(&db)]).code, 0);
    let pages = commit_some(&db, 2);
    assert_eq!(amber(&["checkpoint", s(&db)]).code, 0);
    flip(&db, pages[1] * 4096 + 2000);
    let r = amber(&["verify", s(&db)]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with("problem:"))
        .expect("a problem line");
    assert!(line.contains(&format!("page {}", pages[1])), "{line}");
    assert!(line.contains("checksum mismatch"), "{line}");
    assert!(r.stdout.contains("1 problem(s)"), "{}", r.stdout);
}

#[test]
fn verify_names_a_damaged_log_record() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_in(&dir);
    assert_eq!(amber(&["create", s(&db)]).code, 0);
    commit_some(&db, 3);
    // The first record (LSN 1) is a type record: damage inside its
    // descriptor. Later durable commits prove it was synced: damage.
    flip(&wal_path(&db), 8192 + 17);
    let r = amber(&["verify", s(&db)]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("log record at LSN 1: checksum mismatch"),
        "{}",
        r.stdout
    );
    // Other commands refuse, on one line.
    assert_error(&amber(&["recover", s(&db)]), "LSN 1");
    let r = amber(&["inspect", s(&db)]);
    assert_error(&r, "LSN 1");
    assert!(r.stdout.contains("tail: CORRUPT at LSN 1"), "{}", r.stdout);
}

/// `recover --salvage` takes a log whose damaged record has durable
/// commits after it (which `recover` refuses) back to the last commit
/// before the damage, saves the bytes it cuts, and names every transaction
/// lost; a second salvage has nothing to give up.
#[test]
fn salvage_cuts_a_damaged_log_and_names_what_is_lost() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_in(&dir);
    assert_eq!(amber(&["create", s(&db)]).code, 0);
    commit_some(&db, 5);
    let mut recs = Vec::new();
    let view = amber::inspect::read_log(&db, &mut |r| recs.push(r.clone())).expect("read log");
    let commits: Vec<_> = recs
        .iter()
        .filter(|r| r.kind == amber::inspect::RecordKind::Commit)
        .map(|r| (r.lsn, r.txid))
        .collect();
    assert_eq!(commits.len(), 5);
    // Damage the first record after the second commit: the third
    // transaction's type record.
    let third = recs
        .iter()
        .find(|r| r.lsn > commits[1].0)
        .expect("a record after the second commit");
    let base = view
        .headers
        .iter()
        .filter_map(|h| match h {
            amber::inspect::LogHeaderCopy::Valid { header, .. } => Some(header),
            amber::inspect::LogHeaderCopy::Damaged(_) => None,
        })
        .max_by_key(|h| h.generation)
        .expect("a valid log header")
        .base_lsn;
    let off = amber::internals::wal::header::RECORDS_START + (third.lsn - base);
    flip(&wal_path(&db), off + 17);
    assert_error(&amber(&["recover", s(&db)]), &format!("LSN {}", third.lsn));

    let r = amber(&["recover", "--salvage", s(&db)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains(&format!("damaged record at LSN {}", third.lsn)),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("transactions lost (their commit records were after the damage): 3"),
        "{}",
        r.stdout
    );
    for (lsn, txid) in &commits[2..] {
        let line = format!(
            "transaction {}, committed at LSN {lsn}",
            txid.expect("txid")
        );
        assert!(r.stdout.contains(&line), "missing `{line}`: {}", r.stdout);
    }
    let saved = PathBuf::from(format!(
        "{}.salvaged-{}",
        wal_path(&db).display(),
        third.lsn
    ));
    let size = std::fs::metadata(&saved).expect("saved tail").len();
    assert!(
        r.stdout.contains(&format!("{size} byte(s) cut")),
        "{}",
        r.stdout
    );

    // The first two transactions survive, the last three are gone, and the
    // database is whole.
    let st = Store::open(Arc::new(RealVfs), &db, StoreOptions::default()).expect("open");
    for i in 0..5 {
        assert_eq!(st.root(&format!("root{i}")).is_some(), i < 2, "root{i}");
    }
    st.close().expect("close");
    assert_eq!(amber(&["verify", s(&db)]).code, 0);
    let r = amber(&["recover", "--salvage", s(&db)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("nothing given up"), "{}", r.stdout);
}

/// `recover --new-log` makes a missing log again for a database closed
/// cleanly, losing nothing; it refuses when the log exists.
#[test]
fn new_log_recreates_a_missing_log() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_in(&dir);
    assert_eq!(amber(&["create", s(&db)]).code, 0);
    commit_some(&db, 3);
    assert_error(
        &amber(&["recover", "--new-log", s(&db)]),
        "a new log is made only for a database whose log is missing or unreadable",
    );
    // A clean close installs everything; then the log goes missing.
    Store::open(Arc::new(RealVfs), &db, StoreOptions::default())
        .expect("open")
        .close()
        .expect("close");
    std::fs::remove_file(wal_path(&db)).expect("remove log");
    assert_error(&amber(&["recover", s(&db)]), "log file is missing");
    let r = amber(&["recover", "--new-log", s(&db)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("new log for"), "{}", r.stdout);
    let st = Store::open(Arc::new(RealVfs), &db, StoreOptions::default()).expect("open");
    for i in 0..3 {
        assert!(st.root(&format!("root{i}")).is_some(), "root{i}");
    }
    st.close().expect("close");
    assert_eq!(amber(&["verify", s(&db)]).code, 0);
}

#[test]
fn verify_reports_a_torn_tail() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_in(&dir);
    assert_eq!(amber(&["create", s(&db)]).code, 0);
    commit_some(&db, 3);
    let wal = wal_path(&db);
    let len = std::fs::metadata(&wal).expect("stat").len();
    // Inside the last transaction's commit record: nothing after it proves
    // it durable, so it reads as a torn tail.
    flip(&wal, len - 3);
    let r = amber(&["verify", s(&db)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("note: log: torn tail at LSN"),
        "{}",
        r.stdout
    );
    let r = amber(&["inspect", s(&db)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("2 committed, 1 uncommitted"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("tail: torn at LSN"), "{}", r.stdout);
}

#[test]
fn foreign_missing_and_locked_files_are_one_line_errors() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let txt = dir.path().join("notes.txt");
    std::fs::write(&txt, "this is not a database\n").expect("write");
    for cmd in ["inspect", "verify", "checkpoint", "recover"] {
        assert_error(&amber(&[cmd, s(&txt)]), "not an Amber database");
    }
    // Garbage with a log beside it.
    std::fs::write(wal_path(&txt), vec![7u8; 9000]).expect("write");
    assert_error(&amber(&["verify", s(&txt)]), "not an Amber database");

    let missing = dir.path().join("missing.amber");
    for cmd in ["inspect", "verify", "checkpoint", "recover"] {
        assert_error(&amber(&[cmd, s(&missing)]), "no such file");
    }
    assert_error(&amber(&["inspect", s(dir.path())]), "is a directory");

    let db = db_in(&dir);
    assert_eq!(amber(&["create", s(&db)]).code, 0);
    {
        let _held = Store::open(Arc::new(RealVfs), &db, StoreOptions::default()).expect("open");
        // Reading beside a writer works; changing the files does not.
        for cmd in ["inspect", "verify"] {
            let r = amber(&[cmd, s(&db)]);
            assert_eq!(r.code, 0, "{cmd} beside a writer: {}{}", r.stdout, r.stderr);
        }
        for cmd in ["checkpoint", "recover"] {
            assert_error(&amber(&[cmd, s(&db)]), "in use");
        }
    }
    std::fs::remove_file(wal_path(&db)).expect("remove log");
    for cmd in ["inspect", "verify", "checkpoint", "recover"] {
        assert_error(&amber(&[cmd, s(&db)]), "log file is missing");
    }
    // A log of another database.
    let other = dir.path().join("other.amber");
    assert_eq!(amber(&["create", s(&other)]).code, 0);
    std::fs::copy(wal_path(&other), wal_path(&db)).expect("copy log");
    assert_error(&amber(&["recover", s(&db)]), "another database");
}

#[test]
fn bad_arguments_are_one_line_errors() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_in(&dir);
    assert_error(
        &amber(&["create", s(&db), "--page-size", "1000"]),
        "page size 1000",
    );
    assert_error(
        &amber(&["create", s(&db), "--page-size", "65536"]),
        "page size 65536",
    );
    assert_error(
        &amber(&["create", s(&db), "--page-size", "lots"]),
        "--page-size",
    );
    assert!(!db.exists() && !wal_path(&db).exists(), "nothing created");
    assert_error(
        &amber(&["create", s(&dir.path().join("no/such/dir/db"))]),
        "No such file",
    );
    assert_error(&amber(&[]), "subcommand");
    assert_error(&amber(&["frobnicate"]), "frobnicate");
    assert_error(&amber(&["inspect"]), "PATH");
    assert_error(&amber(&["inspect", "a", "b"]), "unexpected argument");
    assert_error(
        &amber(&["bench"]),
        "commit, recovery, oo1, epvm, texas, hot, faults",
    );
    assert_error(
        &amber(&["bench", "nosuch"]),
        "unknown benchmark 'nosuch'; known: commit, recovery, oo1, epvm, texas, hot, faults",
    );
    assert_error(
        &amber(&["bench", "hot", "--backend", "mprotect"]),
        "--backend",
    );
    assert_error(&amber(&["bench", "faults", "--pages", "x"]), "--pages");
    assert_error(&amber(&["bench", "commit", "--iters", "x"]), "--iters");
    assert_error(&amber(&["bench", "commit", "--bogus"]), "--bogus");
    let r = amber(&["--help"]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("inspect"), "{}", r.stdout);
    let r = amber(&["bench", "commit", "--help"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("--iters"), "{}", r.stdout);
}

#[test]
fn benches_run_and_write_json() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("commit.json");
    let r = amber(&[
        "bench",
        "commit",
        "--iters",
        "4",
        "--warmup",
        "1",
        "--dir",
        s(dir.path()),
        "--json",
        s(&json),
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parses");
    for k in [
        "commit_median_us",
        "bare_sync_median_us",
        "commit_vs_bare_sync",
        "log_bytes_per_commit",
        "iters",
        "kernel",
        "machine",
        "filesystem",
    ] {
        assert!(v.get(k).is_some(), "{k} missing from {v}");
    }
    // 100 bytes in a ranges record (26 bytes beyond them) and a commit record.
    assert_eq!(v["log_bytes_per_commit"], 146.0);

    let json = dir.path().join("recovery.json");
    let r = amber(&[
        "bench",
        "recovery",
        "--wal-mib",
        "1",
        "--pages",
        "32",
        "--runs",
        "1",
        "--no-cold",
        "--dir",
        s(dir.path()),
        "--json",
        s(&json),
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parses");
    for k in [
        "recovery_s",
        "sequential_read_s",
        "recovery_vs_read",
        "recovery_vs_read_basis",
        "recovery_vs_read_warm",
        "recovery_with_install_s",
        "records",
        "transactions",
        "machine",
        "kernel",
    ] {
        assert!(v.get(k).is_some(), "{k} missing from {v}");
    }
    assert_error(
        &amber(&["bench", "commit", "--dir", s(&dir.path().join("nope"))]),
        "nope",
    );

    let json = dir.path().join("hot.json");
    let r = amber(&[
        "bench",
        "hot",
        "--objects",
        "5000",
        "--runs",
        "3",
        "--backend",
        "sigsegv",
        "--dir",
        s(dir.path()),
        "--json",
        s(&json),
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("hot_vs_memory"), "{}", r.stdout);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parses");
    for k in ["amber_hot_ms", "memory_hot_ms", "hot_vs_memory", "backends"] {
        assert!(v.get(k).is_some(), "{k} missing from {v}");
    }
    assert!(v["backends"]["sigsegv"]["hot_vs_memory"].as_f64().is_some());

    let json = dir.path().join("faults.json");
    let r = amber(&[
        "bench",
        "faults",
        "--pages",
        "64",
        "--runs",
        "1",
        "--dir",
        s(dir.path()),
        "--json",
        s(&json),
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parses");
    for b in ["uffd", "sigsegv"] {
        for k in ["cold_fault_us", "cluster8_us_per_page", "faults"] {
            assert!(
                v["backends"][b].get(k).is_some(),
                "{b}.{k} missing from {v}"
            );
        }
    }
    assert!(v["breakdown"]["swizzle_us"].as_f64().is_some());
    for k in [
        "minor_fault_ns",
        "minor_fault_in_order_ns",
        "minor_fault_one_per_page_ns",
        "copy_fresh_us",
    ] {
        let x = v["breakdown"]["limits"][k].as_f64();
        assert!(x.is_some_and(|x| x > 0.0), "limits.{k}: {v}");
    }
}

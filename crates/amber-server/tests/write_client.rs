//! Writes through the server with the public API (`Db::connect`, `begin`,
//! `alloc`, `commit`, `transact`), clients in threads of this test: a
//! client's commit is seen by another after it refreshes and is in the
//! database after the server stops; two clients incrementing one counter
//! under `Db::transact` lose no increment; and a serial model — clients
//! moving amounts between accounts — ends in the balances that the
//! committed transfers imply, in whatever order they ran: total
//! preserved, no lost update.

mod common;

use amber::{Db, Options, PRef, PVec, Persistent};
use common::{start, writing};
use std::path::Path;

#[derive(Persistent)]
#[repr(C)]
struct Account {
    balance: u64,
    /// Transfers in or out of it.
    moves: u64,
    /// Keeps accounts on pages of their own, so that transfers between
    /// other accounts do not conflict with this one's.
    pad: [u64; 500],
}

#[derive(Persistent)]
#[repr(C)]
struct Bank {
    accounts: PVec<PRef<Account>>,
}

#[derive(Persistent)]
#[repr(C)]
struct Counter {
    n: u64,
}

/// A type the database does not hold until a client defines it.
#[derive(Persistent)]
#[repr(C)]
struct Fresh {
    n: u64,
    tag: u64,
}

const START: u64 = 1_000_000;

fn connect(addr: std::net::SocketAddr) -> Db {
    common::connect_db(addr, "bank")
}

/// A database with `accounts` accounts of [`START`] each and a counter.
fn create(path: &Path, accounts: usize) {
    let mut db = Db::create(path, Options::default()).expect("created");
    let mut tx = db.begin().expect("begun");
    let bank = tx
        .alloc(Bank {
            accounts: PVec::new(),
        })
        .expect("allocated");
    for _ in 0..accounts {
        let a = tx
            .alloc(Account {
                balance: START,
                moves: 0,
                pad: [0; 500],
            })
            .expect("allocated");
        tx.push(bank, |b| &mut b.accounts, a).expect("pushed");
    }
    tx.set_root("bank", bank).expect("root");
    let counter = tx.alloc(Counter { n: 0 }).expect("allocated");
    tx.set_root("counter", counter).expect("root");
    tx.commit().expect("committed");
    db.close().expect("closed");
}

#[test]
fn a_clients_commit_is_seen_by_another_and_kept() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("bank.amber");
    create(&path, 2);
    let server = start(writing(&[("bank", &path)]));
    let mut a = connect(server.addr);
    let mut b = connect(server.addr);
    assert!(b.root::<Fresh>("fresh").expect("roots").is_none());

    let mut tx = a.begin().expect("begun");
    let fresh = tx.alloc(Fresh { n: 41, tag: 7 }).expect("allocated");
    tx.get_mut(fresh).n += 1;
    tx.set_root("fresh", fresh).expect("root");
    tx.commit().expect("committed");
    // a sees its own commit.
    assert_eq!(a.get(a.root::<Fresh>("fresh").unwrap().unwrap()).n, 42);

    // b, at its older snapshot, does not, until it moves.
    assert!(b.root::<Fresh>("fresh").expect("roots").is_none());
    assert!(b.refresh().expect("refreshed"));
    let got: PRef<Fresh> = b.root("fresh").expect("roots").expect("the root");
    assert_eq!((b.get(got).n, b.get(got).tag), (42, 7));
    drop((a, b));
    server.shutdown();

    let db = Db::open(&path, Options::default()).expect("opened");
    let got: PRef<Fresh> = db.root("fresh").expect("roots").expect("the root");
    assert_eq!((db.get(got).n, db.get(got).tag), (42, 7));
}

/// Account `i` of the bank, as a pointer of `db`.
fn account(db: &Db, i: usize) -> PRef<Account> {
    let bank: PRef<Bank> = db.root("bank").expect("roots").expect("the bank");
    db.slice(&db.get(bank).accounts)[i]
}

/// What `begin` guarantees (docs/design.md §11.2): a transaction reads
/// nothing older than the last commit acknowledged to anyone before it
/// began, whatever the client holds in its cache. Client `a` holds both
/// accounts' pages and commits to account 0 (so that its snapshot is the
/// one its commit's answer gave it: a `Begin` answered ahead, with that
/// answer, would begin there); then `b`, in another thread, commits to
/// account 1 and says so through a channel once its commit is
/// acknowledged; then `a` begins, and must read `b`'s value at once — no
/// refresh in between. Its plain reads before the `begin` stay at its
/// snapshot. A client that began on pages it held without learning of
/// `b`'s commit (a `Begin` without a round trip whose invalidations had
/// not reached it) fails here.
#[test]
fn a_begin_reads_every_commit_acknowledged_before_it() {
    const ROUNDS: u64 = 25;
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("bank.amber");
    create(&path, 2);
    let server = start(writing(&[("bank", &path)]));
    let mut a = connect(server.addr);
    let (a0, a1) = (account(&a, 0), account(&a, 1));
    let (go, went) = std::sync::mpsc::channel::<()>();
    let (acked, ack) = std::sync::mpsc::channel::<u64>();
    let addr = server.addr;
    let other = std::thread::spawn(move || {
        let mut b = connect(addr);
        let b1 = account(&b, 1);
        while went.recv().is_ok() {
            let mut tx = b.begin().expect("begun");
            let acc = tx.get_mut(b1);
            acc.moves += 1;
            let moves = acc.moves;
            tx.commit().expect("committed");
            acked.send(moves).expect("a listens");
        }
    });
    for round in 1..=ROUNDS {
        a.transact(|tx| {
            tx.get_mut(a0).moves += 1;
            Ok(())
        })
        .expect("committed");
        let before = a.get(a1).moves;
        assert_eq!(before, round - 1, "a's commit moved it past b's last one");
        go.send(()).expect("b listens");
        let b_moves = ack.recv().expect("b committed");
        assert_eq!(b_moves, round);
        assert_eq!(a.get(a1).moves, before, "the snapshot moves only at begin");
        let tx = a.begin().expect("begun");
        assert_eq!(
            tx.get(a1).moves,
            b_moves,
            "round {round}: a transaction begun after b's commit was acknowledged reads it"
        );
        assert_eq!(tx.get(a0).moves, round);
    }
    drop(go);
    other.join().expect("b's thread");
    drop(a);
    server.shutdown();
}

/// A client keeps what it wrote: its commit's answer leaves out the pages
/// only it changed, so the next transaction on them fetches nothing; a
/// page another client changed meanwhile is dropped and fetched again.
#[test]
fn a_client_keeps_the_pages_it_wrote() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("bank.amber");
    create(&path, 2);
    let server = start(writing(&[("bank", &path)]));
    let (mut a, mut b) = (connect(server.addr), connect(server.addr));
    let (a0, a1) = (account(&a, 0), account(&a, 1));
    let bump = |db: &mut Db, p: PRef<Account>| {
        db.transact(|tx| {
            tx.get_mut(p).moves += 1;
            Ok(())
        })
        .expect("committed")
    };
    bump(&mut a, a0);
    let fetched = a.stats().fetched;
    for _ in 0..5 {
        bump(&mut a, a0);
    }
    assert_eq!(a.stats().fetched, fetched, "its own pages stay");
    assert_eq!(a.get(a0).moves, 6);
    // Another client changes account 1: a drops that page at its next
    // begin and fetches it again.
    let b1 = account(&b, 1);
    bump(&mut b, b1);
    bump(&mut a, a1);
    assert!(
        a.stats().fetched > fetched,
        "a page another client changed is fetched again"
    );
    assert_eq!(a.get(a1).moves, 2);
    drop((a, b));
    server.shutdown();
}

#[test]
fn transact_under_contention_loses_no_increment() {
    const CLIENTS: u64 = 3;
    const EACH: u64 = 15;
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("bank.amber");
    create(&path, 1);
    let server = start(writing(&[("bank", &path)]));
    let addr = server.addr;
    let threads: Vec<_> = (0..CLIENTS)
        .map(|_| {
            std::thread::spawn(move || {
                let mut db = connect(addr);
                let counter: PRef<Counter> = db.root("counter").unwrap().unwrap();
                for _ in 0..EACH {
                    db.transact(|tx| {
                        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        tx.get_mut(counter).n += 1;
                        Ok(())
                    })
                    .expect("committed within transact's attempts");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a client");
    }
    let mut db = connect(addr);
    let counter: PRef<Counter> = db.root("counter").unwrap().unwrap();
    db.refresh().expect("refreshed");
    assert_eq!(db.get(counter).n, CLIENTS * EACH);
    eprintln!(
        "{} increments took {} runs",
        CLIENTS * EACH,
        RUNS.load(std::sync::atomic::Ordering::Relaxed)
    );
}

#[test]
fn transfers_between_accounts_serialize() {
    const CLIENTS: u64 = 4;
    const EACH: u64 = 25;
    const ACCOUNTS: usize = 6;
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("bank.amber");
    create(&path, ACCOUNTS);
    let server = start(writing(&[("bank", &path)]));
    let addr = server.addr;
    let threads: Vec<_> = (0..CLIENTS)
        .map(|client| {
            std::thread::spawn(move || {
                let mut db = connect(addr);
                let bank: PRef<Bank> = db.root("bank").unwrap().unwrap();
                let accounts: Vec<PRef<Account>> = db.slice(&db.get(bank).accounts).to_vec();
                let mut seed = client * 7919 + 1;
                let mut done = Vec::new();
                for _ in 0..EACH {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let from = (seed >> 33) as usize % ACCOUNTS;
                    let to = (from + 1 + (seed >> 40) as usize % (ACCOUNTS - 1)) % ACCOUNTS;
                    let amount = 1 + (seed >> 50) % 100;
                    let moved = db.transact(|tx| {
                        let (f, t) = (accounts[from], accounts[to]);
                        let b = tx.get(f).balance;
                        tx.get_mut(f).balance = b - amount;
                        tx.get_mut(f).moves += 1;
                        let b = tx.get(t).balance;
                        tx.get_mut(t).balance = b + amount;
                        tx.get_mut(t).moves += 1;
                        Ok(())
                    });
                    match moved {
                        Ok(()) => done.push((from, to, amount)),
                        // Lost every attempt: not committed, and not counted.
                        Err(e) if e.is_conflict() => {}
                        Err(e) => panic!("transfer: {e}"),
                    }
                }
                done
            })
        })
        .collect();
    let done: Vec<(usize, usize, u64)> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("a client"))
        .collect();
    assert!(
        done.len() as u64 > CLIENTS * EACH / 2,
        "only {} of {} transfers committed",
        done.len(),
        CLIENTS * EACH
    );
    // Every committed transfer, applied in any order (they commute), gives
    // the balances; a lost update would not.
    let mut want = vec![(START as i64, 0u64); ACCOUNTS];
    for &(f, t, amount) in &done {
        want[f].0 -= amount as i64;
        want[f].1 += 1;
        want[t].0 += amount as i64;
        want[t].1 += 1;
    }
    let db = connect(addr);
    let bank: PRef<Bank> = db.root("bank").unwrap().unwrap();
    let accounts: Vec<PRef<Account>> = db.slice(&db.get(bank).accounts).to_vec();
    let got: Vec<(i64, u64)> = accounts
        .iter()
        .map(|&a| (db.get(a).balance as i64, db.get(a).moves))
        .collect();
    assert_eq!(got, want);
    let total: i64 = got.iter().map(|g| g.0).sum();
    assert_eq!(total, START as i64 * ACCOUNTS as i64);
}

/// Write skew, the anomaly a validation of written pages alone would let
/// through: two transactions read both accounts and each takes from a
/// different one. The second to commit read a page the first wrote: it
/// conflicts, though the pages they write differ. A transaction that did
/// not read the other account commits, though that account's page was
/// sent to its client: the server validates what the client read.
#[test]
fn a_read_of_a_page_another_commit_wrote_is_a_conflict() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("bank.amber");
    create(&path, 2);
    let server = start(writing(&[("bank", &path)]));
    let (mut a, mut b) = (connect(server.addr), connect(server.addr));
    // Each client's pointers to the two accounts; reading them sends both
    // pages to both clients.
    let both = |db: &Db| -> (PRef<Account>, PRef<Account>) {
        let bank: PRef<Bank> = db.root("bank").unwrap().unwrap();
        let accounts = db.slice(&db.get(bank).accounts);
        let (x, y) = (accounts[0], accounts[1]);
        assert_eq!(db.get(x).balance + db.get(y).balance, 2 * START);
        (x, y)
    };
    let (ax, ay) = both(&a);
    let (bx, by) = both(&b);
    let withdraw = |tx: &mut amber::Tx<'_>, (x, y): (PRef<Account>, PRef<Account>), from| {
        let both = tx.get(x).balance + tx.get(y).balance;
        assert!(both >= START, "the rule the withdrawal keeps");
        let from = if from == 0 { x } else { y };
        tx.get_mut(from).balance -= START;
    };
    let mut ta = a.begin().expect("begun");
    let mut tb = b.begin().expect("begun");
    withdraw(&mut ta, (ax, ay), 0);
    withdraw(&mut tb, (bx, by), 1);
    ta.commit().expect("the first commits");
    let e = tb
        .commit()
        .expect_err("the second read x, which the first wrote");
    assert!(e.is_conflict(), "{e}");
    // b's next transaction reads y alone: a's later commits to x do not
    // concern it.
    let mut tb = b.begin().expect("begun");
    let mut ta = a.begin().expect("begun");
    tb.get_mut(by).moves += 1;
    ta.get_mut(ax).moves += 1;
    ta.commit().expect("committed");
    tb.commit()
        .expect("x's page was sent to b, but b did not read it");
    let c = connect(server.addr);
    let bank: PRef<Bank> = c.root("bank").unwrap().unwrap();
    let accounts = c.slice(&c.get(bank).accounts);
    let (x, y) = (c.get(accounts[0]), c.get(accounts[1]));
    assert_eq!((x.balance, y.balance), (0, START));
    assert_eq!((x.moves, y.moves), (1, 1));
}

#[derive(Persistent)]
#[repr(C)]
struct Bulk {
    items: PVec<u64>,
}

/// The blocks of a transaction a client aborted stay its own while it is
/// connected: the client keeps frames shaped as those blocks (a `PRef`
/// into them must be refused, not lead to another client's object), so
/// another client's commit may not place its blocks there. Client `a`
/// allocates blocks of several shapes and aborts, again and again, while
/// `b` commits blocks of other shapes; each reads all of what `b`
/// committed.
#[test]
fn blocks_a_client_aborted_are_not_given_to_another() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("bank.amber");
    create(&path, 1);
    let server = start(writing(&[("bank", &path)]));
    let mut a = connect(server.addr);
    let mut b = connect(server.addr);
    let mut committed = Vec::new();
    for round in 0..12u64 {
        let mut tx = a.begin().expect("a begins");
        for k in 0..3u64 {
            let items: Vec<u64> = (0..(round * 211 + k * 1300) % 4000 + 1).collect();
            let v = tx.alloc(Bulk { items: PVec::new() }).expect("a allocates");
            tx.extend_from_slice(v, |x| &mut x.items, &items)
                .expect("a extends");
        }
        tx.abort().expect("a aborts");
        let mut tx = b.begin().expect("b begins");
        let n = (round * 733) % 5000 + 1;
        let v = tx.alloc(Bulk { items: PVec::new() }).expect("b allocates");
        let items: Vec<u64> = (0..n).map(|i| i * 3 + round).collect();
        tx.extend_from_slice(v, |x| &mut x.items, &items)
            .expect("b extends");
        tx.set_root(&format!("bulk{round}"), v).expect("root");
        tx.commit().expect("b commits");
        committed.push((round, items));
        a.refresh().expect("a refreshes");
        for db in [&a, &b] {
            for (r, items) in &committed {
                let v: PRef<Bulk> = db.root(&format!("bulk{r}")).expect("roots").expect("root");
                let got = db
                    .try_get(v)
                    .unwrap_or_else(|e| panic!("round {round}: bulk{r}: {e}"));
                assert_eq!(db.slice(&got.items), &items[..], "round {round}: bulk{r}");
            }
        }
    }
    drop((a, b));
    server.shutdown();
}

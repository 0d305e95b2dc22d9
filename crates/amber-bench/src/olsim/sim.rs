//! The discrete-event simulation of one server with its clients, network,
//! CPU and device, for one seed.
//!
//! Clients run transactions of one object each: fetch its page (with
//! probability FetchRatio), think, modify it (WriteRatio), commit. Messages
//! take the network latency plus CPU at both ends. The server CPU serves its
//! work in arrival order. The device serves requests in the order the server
//! issues them (FIFO, as in the paper); the server issues fetch reads when a
//! client waits for a page not in its cache, and background operations when
//! they are needed: a dirty-page write when clean pages drop below the write
//! trigger, an installation read when the object log is full (absorbing and
//! opportunistic servers) or at commit (basic server). A background request
//! is a placeholder in the FIFO whose page is chosen when the device starts
//! it, from the arm's position at that moment: SPTF among dirty pages for
//! writes; oldest entry (absorbing) or SPTF with the age weight
//! (opportunistic) for installation reads.
//!
//! The run starts in the steady state the paper describes (the cache full
//! and almost all dirty, the log full): see [`Sim::new`].

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use super::cache::{NoFrame, PageCache};
use super::disk::{Access, Device, HeadPos};
use super::log::{Entry, ObjectLog};
use super::params::{Params, ServerKind};
use super::pool::Layout;
use crate::rng::Rng;

/// What happens at an instant.
#[derive(Clone, Copy, Debug)]
enum Ev {
    /// Client starts a transaction.
    TxStart(u32),
    /// A fetch request reaches the server.
    FetchArrives(u32),
    /// The server has received it: look the page up.
    FetchLookup(u32),
    /// The client ends its think time and sends its commit.
    ThinkDone(u32),
    /// A commit request reaches the server.
    CommitArrives(u32),
    /// The server has validated it.
    CommitValidated(u32),
    /// The commit confirmation reaches the client.
    Committed(u32),
    /// A device channel completes its request.
    DeviceDone(u32),
}

struct Scheduled {
    t: f64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    /// Reversed: the heap pops the earliest time, then the first scheduled.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .t
            .total_cmp(&self.t)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// A request in the device's FIFO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Req {
    /// Read of a page a client waits for.
    Fetch(u32),
    /// Installation read of a given page (basic server).
    InstallPage(u32),
    /// Installation read of the page the log's policy chooses at dispatch.
    Install,
    /// Write of the dirty page SPTF chooses at dispatch.
    Write,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Fetch,
    Install,
    Write,
}

#[derive(Clone, Copy, Debug)]
struct InFlight {
    op: Op,
    page: u32,
    /// Page version a write carries.
    version: u32,
    access: Access,
}

#[derive(Clone, Copy, Debug, Default)]
struct Client {
    page: u32,
    writes: bool,
}

/// Counters over the measured interval.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counters {
    /// Transactions whose commit was confirmed.
    pub transactions: u64,
    /// Modifications committed.
    pub modifications: u64,
    /// Installation reads completed.
    pub install_reads: u64,
    /// Their arm time (positioning + transfer), ms.
    pub install_arm_ms: f64,
    /// Dirty-page writes completed.
    pub writes: u64,
    /// Their arm time, ms.
    pub write_arm_ms: f64,
    /// Fetch reads completed.
    pub fetch_reads: u64,
    /// Their arm time, ms.
    pub fetch_arm_ms: f64,
    /// Device busy time including controller overhead, ms (summed over channels).
    pub device_busy_ms: f64,
    /// Server CPU busy time, ms.
    pub cpu_busy_ms: f64,
    /// Fetches answered from the server cache or by a read under way.
    pub fetch_hits: u64,
    /// Fetch requests.
    pub fetches: u64,
    /// Modifications that found their page in the server cache.
    pub modification_hits: u64,
}

/// Violations of the simulator's invariants (all zero in a correct run).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Violations {
    /// A commit installed twice.
    pub double_installs: u64,
    /// A fetch answered with a page missing a committed modification.
    pub stale_fetches: u64,
    /// A clean page replaced although the disk lacks its latest version.
    pub lost_evictions: u64,
}

/// One simulation.
pub struct Sim {
    server: ServerKind,
    p: Params,
    device: Device,
    layout: Layout,
    now: f64,
    seq: u64,
    events: BinaryHeap<Scheduled>,
    rng: Vec<Rng>,
    clients: Vec<Client>,
    cpu_free: f64,
    cache: PageCache,
    log: ObjectLog,
    blocked: VecDeque<u32>,
    waiters: HashMap<u32, Vec<u32>>,
    queue: VecDeque<Req>,
    channels: Vec<Option<InFlight>>,
    head: HeadPos,
    installs_pending: usize,
    writes_pending: usize,
    committed: Vec<u32>,
    cached: Vec<u32>,
    on_disk: Vec<u32>,
    installed: Vec<bool>,
    next_commit: u64,
    measure_from: f64,
    draining: bool,
    /// Counters over the measured interval.
    pub counters: Counters,
    /// Invariant violations over the whole run.
    pub violations: Violations,
    /// How long each modification installed from the log during the
    /// measured interval waited there, ms.
    pub waits: Vec<f64>,
}

impl Sim {
    /// A simulation of `server` on `device` seeded with `seed`, in the
    /// steady state: the page cache full of uniformly chosen pages, all
    /// dirty but `write_trigger` of them, and (absorbing and opportunistic
    /// servers) the log full of modifications of uniformly chosen pages not
    /// in the cache. Each client starts its first transaction at a uniform
    /// time within one think time.
    pub fn new(server: ServerKind, p: &Params, device: &Device, seed: u64) -> Self {
        let sectors_per_bucket = match device {
            Device::Disk(g) => g.sectors_per_cylinder(),
            Device::Flash(_) => u64::MAX,
        };
        let layout = Layout {
            pages: p.database_pages,
            sectors_per_page: p.sectors_per_page(),
            first_lbn: 0,
            sectors_per_bucket,
        };
        let pages = p.database_pages as usize;
        let cache_pages = (p.cache_pages(server) as usize).min(pages);
        let log_capacity = match server {
            ServerKind::Page => 0,
            ServerKind::Basic => usize::MAX,
            ServerKind::Absorbing | ServerKind::Opportunistic => p.log_entries().max(1),
        };
        let mut sim = Self {
            server,
            p: p.clone(),
            device: device.clone(),
            now: 0.0,
            seq: 0,
            events: BinaryHeap::new(),
            rng: (0..p.clients)
                .map(|c| Rng::stream(seed, &[1, u64::from(c)]))
                .collect(),
            clients: vec![Client::default(); p.clients as usize],
            cpu_free: 0.0,
            cache: PageCache::new(&layout, cache_pages),
            log: ObjectLog::new(&layout, log_capacity),
            blocked: VecDeque::new(),
            waiters: HashMap::new(),
            queue: VecDeque::new(),
            channels: vec![None; device.channels() as usize],
            head: HeadPos::default(),
            installs_pending: 0,
            writes_pending: 0,
            committed: vec![0; pages],
            cached: vec![0; pages],
            on_disk: vec![0; pages],
            installed: Vec::new(),
            next_commit: 0,
            measure_from: p.warmup_s * 1000.0,
            draining: false,
            counters: Counters::default(),
            violations: Violations::default(),
            waits: Vec::new(),
            layout,
        };
        let mut init = Rng::stream(seed, &[0]);
        // A partial Fisher–Yates shuffle picks the cached pages.
        let mut order: Vec<u32> = (0..p.database_pages).collect();
        for i in 0..cache_pages {
            let j = i + init.below((pages - i) as u64) as usize;
            order.swap(i, j);
            let page = order[i];
            let dirty = i >= p.write_trigger as usize;
            if dirty {
                sim.committed[page as usize] = 1;
                sim.cached[page as usize] = 1;
            }
            // Within capacity: no page is replaced.
            let _ = sim.cache.admit(&sim.layout, page, dirty);
        }
        if matches!(server, ServerKind::Absorbing | ServerKind::Opportunistic) {
            while !sim.log.is_full() && cache_pages < pages {
                let k = cache_pages + init.below((pages - cache_pages) as u64) as usize;
                let page = order[k];
                let entry = sim.new_commit(page);
                sim.log.append(&sim.layout, page, entry, 0.0, false);
            }
        }
        for c in 0..p.clients {
            let t = init.next_f64() * p.think_ms;
            sim.at(t, Ev::TxStart(c));
        }
        sim
    }

    fn at(&mut self, t: f64, ev: Ev) {
        self.seq += 1;
        self.events.push(Scheduled {
            t,
            seq: self.seq,
            ev,
        });
    }

    fn measuring(&self) -> bool {
        self.now >= self.measure_from && !self.draining
    }

    /// Runs the server CPU for `ms` from now (after the work queued before
    /// it) and returns when it is done.
    fn cpu(&mut self, ms: f64) -> f64 {
        let start = self.now.max(self.cpu_free);
        self.cpu_free = start + ms;
        if self.measuring() {
            self.counters.cpu_busy_ms += ms;
        }
        self.cpu_free
    }

    fn new_commit(&mut self, page: u32) -> Entry {
        self.committed[page as usize] += 1;
        let commit = self.next_commit;
        self.next_commit += 1;
        self.installed.push(false);
        Entry {
            commit,
            version: self.committed[page as usize],
            logged: self.now,
        }
    }

    /// Runs until simulated time `warmup_s + measure_s`.
    pub fn run(&mut self) {
        let end = (self.p.warmup_s + self.p.measure_s) * 1000.0;
        while let Some(top) = self.events.peek() {
            if top.t > end {
                break;
            }
            self.step();
        }
        self.now = self.now.max(end);
    }

    fn step(&mut self) {
        let Some(s) = self.events.pop() else {
            return;
        };
        self.now = s.t;
        match s.ev {
            Ev::TxStart(c) => self.tx_start(c),
            Ev::FetchArrives(c) => {
                let t = self.cpu(self.p.message_cpu_ms);
                self.at(t, Ev::FetchLookup(c));
            }
            Ev::FetchLookup(c) => self.fetch_lookup(c),
            Ev::ThinkDone(c) => {
                let t = self.now + self.p.message_cpu_ms + self.p.latency_ms;
                self.at(t, Ev::CommitArrives(c));
            }
            Ev::CommitArrives(c) => {
                let t = self.cpu(self.p.message_cpu_ms + self.p.validation_ms);
                self.at(t, Ev::CommitValidated(c));
            }
            Ev::CommitValidated(c) => {
                if !self.clients[c as usize].writes {
                    self.reply_commit(c, 0.0);
                } else {
                    if self.measuring() {
                        self.counters.modifications += 1;
                    }
                    self.modify(c);
                }
            }
            Ev::Committed(c) => {
                if self.measuring() {
                    self.counters.transactions += 1;
                }
                self.tx_start(c);
            }
            Ev::DeviceDone(ch) => self.device_done(ch),
        }
    }

    fn tx_start(&mut self, c: u32) {
        if self.draining {
            return;
        }
        let r = &mut self.rng[c as usize];
        let page = r.below(u64::from(self.p.database_pages)) as u32;
        let fetch = r.chance(self.p.fetch_ratio);
        let writes = r.chance(self.p.write_ratio);
        self.clients[c as usize] = Client { page, writes };
        if fetch {
            let t = self.now + self.p.message_cpu_ms + self.p.latency_ms;
            self.at(t, Ev::FetchArrives(c));
        } else {
            let t = self.now + self.p.think_ms;
            self.at(t, Ev::ThinkDone(c));
        }
    }

    fn fetch_lookup(&mut self, c: u32) {
        let page = self.clients[c as usize].page;
        let measuring = self.measuring();
        if measuring {
            self.counters.fetches += 1;
        }
        if self.cache.contains(page) {
            if measuring {
                self.counters.fetch_hits += 1;
            }
            self.cache.touch(page);
            self.reply_fetch(c);
        } else if let Some(w) = self.waiters.get_mut(&page) {
            if measuring {
                self.counters.fetch_hits += 1;
            }
            w.push(c);
        } else {
            self.waiters.insert(page, vec![c]);
            self.log.start_read(&self.layout, page);
            self.queue.push_back(Req::Fetch(page));
            self.kick();
        }
    }

    fn reply_fetch(&mut self, c: u32) {
        let page = self.clients[c as usize].page as usize;
        if self.cached[page] != self.committed[page] {
            self.violations.stale_fetches += 1;
        }
        let t = self.cpu(self.p.message_cpu_ms);
        let back = t + self.p.latency_ms + self.p.message_cpu_ms + self.p.think_ms;
        self.at(back, Ev::ThinkDone(c));
    }

    fn reply_commit(&mut self, c: u32, extra_cpu_ms: f64) {
        let t = self.cpu(extra_cpu_ms + self.p.message_cpu_ms);
        self.at(
            t + self.p.latency_ms + self.p.message_cpu_ms,
            Ev::Committed(c),
        );
    }

    /// Applies client `c`'s modification; the commit is confirmed unless the
    /// log is full (the client then waits in `blocked`).
    fn modify(&mut self, c: u32) {
        let page = self.clients[c as usize].page;
        if self.cache.contains(page) {
            if self.measuring() {
                self.counters.modification_hits += 1;
            }
            let extra = if self.server == ServerKind::Page {
                self.committed[page as usize] += 1;
                self.cached[page as usize] = self.committed[page as usize];
                0.0
            } else {
                let e = self.new_commit(page);
                self.install(page, e);
                self.p.installation_ms
            };
            self.cache.mark_dirty(&self.layout, page);
            self.cache.touch(page);
            self.write_check();
            self.reply_commit(c, extra);
            return;
        }
        if self.server == ServerKind::Page {
            // The commit carries the whole page; it needs a frame, and
            // waits for a write to free one if every frame is dirty.
            match self.cache.admit(&self.layout, page, true) {
                Ok(victim) => self.replaced(victim),
                Err(NoFrame) => {
                    self.blocked.push_back(c);
                    self.write_check();
                    return;
                }
            }
            self.committed[page as usize] += 1;
            self.cached[page as usize] = self.committed[page as usize];
            self.write_check();
            self.reply_commit(c, 0.0);
            return;
        }
        if self.log.is_full() {
            self.blocked.push_back(c);
            return;
        }
        let entry = self.new_commit(page);
        let reading = self.waiters.contains_key(&page);
        self.log
            .append(&self.layout, page, entry, self.now, reading);
        if self.server == ServerKind::Basic && !reading {
            self.waiters.insert(page, Vec::new());
            self.log.start_read(&self.layout, page);
            self.queue.push_back(Req::InstallPage(page));
            self.kick();
        }
        self.install_check();
        self.reply_commit(c, 0.0);
    }

    fn install(&mut self, page: u32, e: Entry) {
        let done = &mut self.installed[e.commit as usize];
        if *done {
            self.violations.double_installs += 1;
        }
        *done = true;
        self.cached[page as usize] = e.version;
    }

    /// A clean page left the cache: its disk copy must be current.
    fn replaced(&mut self, victim: Option<u32>) {
        if let Some(v) = victim
            && self.on_disk[v as usize] != self.committed[v as usize]
        {
            self.violations.lost_evictions += 1;
        }
    }

    /// Queues writes ([`Sim::queue_writes`]) and starts them if a channel
    /// is idle.
    fn write_check(&mut self) {
        if self.queue_writes() {
            self.kick();
        }
    }

    /// Queues one write for each page that clean pages are below the write
    /// trigger, counting the writes already queued or under way as clean
    /// pages to come (draining: one write for each dirty page not yet being
    /// written, one at a time); returns whether it queued any.
    fn queue_writes(&mut self) -> bool {
        let wanted = if self.draining {
            usize::from(!self.cache.dirty_pool().is_empty())
        } else {
            (self.p.write_trigger as usize)
                .saturating_sub(self.cache.clean_pages())
                .min(self.cache.dirty_pool().len())
        };
        let queued = self.writes_pending < wanted;
        while self.writes_pending < wanted {
            self.writes_pending += 1;
            self.queue.push_back(Req::Write);
        }
        queued
    }

    /// For the servers that defer installations: queues installation reads
    /// when the log is full, one plus one for each commit waiting for a
    /// slot, counting those queued or under way (draining: one at a time
    /// while the log holds entries).
    fn install_check(&mut self) {
        if !matches!(
            self.server,
            ServerKind::Absorbing | ServerKind::Opportunistic
        ) {
            return;
        }
        let wanted = if self.draining {
            usize::from(!self.log.is_empty())
        } else if self.log.is_full() {
            1 + self.blocked.len()
        } else {
            0
        }
        .min(self.log.candidates().len());
        if self.installs_pending < wanted {
            while self.installs_pending < wanted {
                self.installs_pending += 1;
                self.queue.push_back(Req::Install);
            }
            self.kick();
        }
    }

    /// Starts requests on idle channels. A read first takes a frame for its
    /// page ([`PageCache::reserve`]); when there is none, the first write in
    /// the queue goes before it (it will free one), or, with no write
    /// queued, the device waits for one under way.
    fn kick(&mut self) {
        while let Some(ch) = self.channels.iter().position(Option::is_none) {
            let Some(mut req) = self.queue.pop_front() else {
                return;
            };
            if req != Req::Write {
                match self.cache.reserve() {
                    Ok(victim) => self.replaced(victim),
                    Err(NoFrame) => {
                        self.queue_writes();
                        let Some(i) = self.queue.iter().position(|r| *r == Req::Write) else {
                            self.queue.push_front(req);
                            return;
                        };
                        self.queue.remove(i);
                        self.queue.push_front(req);
                        req = Req::Write;
                    }
                }
            }
            let (op, page) = match req {
                Req::Fetch(page) => (Op::Fetch, page),
                Req::InstallPage(page) => (Op::Install, page),
                Req::Install => match self.choose_install() {
                    Some(page) => {
                        self.log.start_read(&self.layout, page);
                        self.waiters.entry(page).or_default();
                        (Op::Install, page)
                    }
                    None => {
                        self.installs_pending -= 1;
                        self.cache.unreserve();
                        continue;
                    }
                },
                Req::Write => match self.choose_write() {
                    Some(page) => {
                        self.cache.start_write(&self.layout, page);
                        (Op::Write, page)
                    }
                    None => {
                        self.writes_pending -= 1;
                        continue;
                    }
                },
            };
            let access = self.access(op, page);
            let version = self.cached[page as usize];
            self.channels[ch] = Some(InFlight {
                op,
                page,
                version,
                access,
            });
            self.at(self.now + access.total(), Ev::DeviceDone(ch as u32));
            // A reserved frame is no longer a clean page.
            self.queue_writes();
        }
    }

    fn access(&mut self, op: Op, page: u32) -> Access {
        match &self.device {
            Device::Disk(g) => {
                let a = g.access(
                    self.head,
                    self.now,
                    self.layout.lbn(page),
                    self.layout.sectors_per_page,
                );
                self.head = a.end;
                a
            }
            Device::Flash(f) => Access {
                overhead: 0.0,
                positioning: 0.0,
                transfer: if op == Op::Write {
                    f.write_ms
                } else {
                    f.read_ms
                },
                end: HeadPos::default(),
            },
        }
    }

    /// The dirty page to write: shortest positioning time from the arm.
    fn choose_write(&self) -> Option<u32> {
        let pool = self.cache.dirty_pool();
        match &self.device {
            Device::Disk(g) => pool
                .nearest(
                    g,
                    &self.layout,
                    self.head,
                    self.now + g.controller_overhead_ms,
                    |_| 0.0,
                    0.0,
                )
                .map(|(p, _)| p),
            Device::Flash(_) => pool.any(),
        }
    }

    /// The page to read for installation: the oldest entry's (absorbing, or
    /// any server on flash, where every read costs the same), else the
    /// shortest age-weighted positioning time.
    fn choose_install(&self) -> Option<u32> {
        let (oldest_page, oldest) = self.log.oldest()?;
        let Device::Disk(g) = &self.device else {
            return Some(oldest_page);
        };
        if self.server != ServerKind::Opportunistic {
            return Some(oldest_page);
        }
        let w = self.p.age_weight;
        let now = self.now;
        self.log
            .candidates()
            .nearest(
                g,
                &self.layout,
                self.head,
                now + g.controller_overhead_ms,
                |p| w * (now - self.log.since(p)),
                w * (now - oldest),
            )
            .map(|(p, _)| p)
    }

    fn device_done(&mut self, ch: u32) {
        let Some(done) = self.channels[ch as usize].take() else {
            return;
        };
        let measuring = self.measuring();
        if measuring {
            let c = &mut self.counters;
            c.device_busy_ms += done.access.total();
            let arm = done.access.arm();
            match done.op {
                Op::Fetch => {
                    c.fetch_reads += 1;
                    c.fetch_arm_ms += arm;
                }
                Op::Install => {
                    c.install_reads += 1;
                    c.install_arm_ms += arm;
                }
                Op::Write => {
                    c.writes += 1;
                    c.write_arm_ms += arm;
                }
            }
        }
        let page = done.page;
        match done.op {
            Op::Write => {
                self.on_disk[page as usize] = done.version;
                self.cache.finish_write(&self.layout, page);
                self.writes_pending -= 1;
                self.write_check();
            }
            Op::Fetch | Op::Install => self.read_done(page, done.op),
        }
        self.unblock();
        self.install_check();
        self.kick();
    }

    /// A read brought `page` in: install its pending modifications, answer
    /// the fetches waiting for it, let blocked commits into the freed log.
    fn read_done(&mut self, page: u32, op: Op) {
        if !self.cache.contains(page) {
            self.cached[page as usize] = self.on_disk[page as usize];
            self.cache.fill(&self.layout, page, false);
        } else {
            // The page server's commit brought it in meanwhile.
            self.cache.unreserve();
            self.cache.touch(page);
        }
        let entries = self.log.take(&self.layout, page);
        if !entries.is_empty() {
            for e in &entries {
                self.install(page, *e);
                if self.measuring() {
                    self.waits.push(self.now - e.logged);
                }
            }
            self.cpu(self.p.installation_ms * entries.len() as f64);
            self.cache.mark_dirty(&self.layout, page);
            self.write_check();
        }
        if op == Op::Install && self.server != ServerKind::Basic {
            self.installs_pending -= 1;
        }
        for c in self.waiters.remove(&page).unwrap_or_default() {
            self.reply_fetch(c);
        }
        self.install_check();
    }

    /// Retries the commits waiting for a log slot (object servers) or a
    /// frame (page server), in arrival order, until one waits again.
    fn unblock(&mut self) {
        while let Some(c) = self.blocked.pop_front() {
            let waiting = self.blocked.len();
            self.modify(c);
            if self.blocked.len() > waiting {
                if let Some(again) = self.blocked.pop_back() {
                    self.blocked.push_front(again);
                }
                return;
            }
        }
    }

    /// Stops the clients, then lets the server install every logged
    /// modification and write every dirty page; returns the pages whose disk
    /// copy lacks a committed modification (0 in a correct run) and whether
    /// every commit was installed exactly once.
    pub fn drain(&mut self) -> (usize, bool) {
        self.draining = true;
        self.install_check();
        self.write_check();
        while !self.events.is_empty() {
            self.step();
            self.install_check();
            self.write_check();
        }
        let behind = (0..self.committed.len())
            .filter(|&p| self.on_disk[p] != self.committed[p])
            .count();
        let all_once = self.installed.iter().all(|&i| i) && self.violations.double_installs == 0;
        (behind, all_once)
    }

    /// Modifications waiting in the log.
    pub fn log_len(&self) -> usize {
        self.log.len()
    }

    /// How long the oldest modification still waiting for an installation
    /// read has waited, ms (0 with none): an entry SPTF keeps passing over
    /// never shows in [`Sim::waits`], but shows here.
    pub fn oldest_wait(&self) -> f64 {
        self.log.oldest().map_or(0.0, |(_, since)| self.now - since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::olsim::disk::{Flash, Geometry};

    /// A small system: 4,000 pages, a 400-page memory, a 30-page log.
    fn small() -> Params {
        Params {
            clients: 30,
            database_pages: 4000,
            memory_pages: 400,
            log_pages: 30,
            write_trigger: 20,
            warmup_s: 5.0,
            measure_s: 20.0,
            ..Params::default()
        }
    }

    fn devices() -> Vec<Device> {
        vec![
            Device::Disk(Geometry::hp97560()),
            Device::Flash(Flash {
                name: "test flash".into(),
                source: "test".into(),
                read_ms: 0.1,
                write_ms: 0.2,
                channels: 4,
            }),
        ]
    }

    /// Every commit is installed exactly once, no fetch sees a page missing
    /// a committed modification, no page is replaced before it is written,
    /// and after the clients stop the server installs the whole log and
    /// writes every dirty page: the disk holds every committed version.
    #[test]
    fn conservation() {
        for device in devices() {
            for server in ServerKind::ALL {
                for p in [
                    small(),
                    Params {
                        fetch_ratio: 0.5,
                        write_ratio: 0.6,
                        age_weight: 0.01,
                        ..small()
                    },
                ] {
                    let mut s = Sim::new(server, &p, &device, 7);
                    s.run();
                    assert!(s.counters.transactions > 1000, "{server:?} ran");
                    assert!(s.counters.modifications > 100);
                    if server != ServerKind::Page {
                        assert!(s.counters.install_reads > 0);
                    }
                    let (behind, all_once) = s.drain();
                    let what = format!("{server:?} on {}", device.name());
                    assert_eq!(s.violations, Violations::default(), "{what}");
                    assert_eq!(behind, 0, "{what}: pages whose disk copy is behind");
                    assert!(all_once, "{what}: a commit not installed exactly once");
                    assert_eq!(s.log_len(), 0, "{what}");
                    assert_eq!(s.cache.dirty_pages(), 0, "{what}");
                }
            }
        }
    }

    /// With a write trigger of one page and more reads under way than the
    /// cache has clean frames, frames run out: reads and the page server's
    /// commits wait for writes, the cache never holds more pages than its
    /// capacity (resident plus reserved), and nothing is lost.
    #[test]
    fn the_cache_never_overfills_when_frames_run_out() {
        for device in devices() {
            for server in ServerKind::ALL {
                let p = Params {
                    clients: 60,
                    fetch_ratio: 0.6,
                    write_ratio: 0.6,
                    write_trigger: 1,
                    ..small()
                };
                let mut s = Sim::new(server, &p, &device, 11);
                let cap = s.cache.capacity();
                let end = (p.warmup_s + p.measure_s) * 1000.0;
                let mut exhausted = 0u64;
                while s.events.peek().is_some_and(|e| e.t <= end) {
                    s.step();
                    let held = s.cache.resident() + s.cache.reserved();
                    assert!(held <= cap, "{server:?}: {held} pages in {cap} frames");
                    exhausted += u64::from(s.cache.clean_pages() == 0);
                }
                let what = format!("{server:?} on {}", device.name());
                assert!(exhausted > 0, "{what}: frames never ran out");
                assert!(s.counters.transactions > 500, "{what} ran");
                let (behind, all_once) = s.drain();
                assert_eq!(s.violations, Violations::default(), "{what}");
                assert_eq!(behind, 0, "{what}");
                assert!(all_once, "{what}");
                assert_eq!(s.cache.reserved(), 0, "{what}");
            }
        }
    }

    #[test]
    fn a_seed_gives_the_same_run_and_another_seed_a_different_one() {
        let device = Device::Disk(Geometry::hp97560());
        let p = small();
        for server in [ServerKind::Basic, ServerKind::Opportunistic] {
            let run = |seed| {
                let mut s = Sim::new(server, &p, &device, seed);
                s.run();
                s.counters
            };
            let a = run(3);
            assert_eq!(a, run(3));
            assert_ne!(a, run(4));
        }
    }

    /// The paper's mechanism on a small scale: with the disk saturated, SPTF
    /// over the log makes installation reads cheaper than FIFO does.
    #[test]
    fn opportunistic_reads_cost_less_than_fifo_reads() {
        let device = Device::Disk(Geometry::hp97560());
        let p = Params {
            database_pages: 40_000,
            memory_pages: 4000,
            log_pages: 300,
            ..small()
        };
        let cost = |server| {
            let mut s = Sim::new(server, &p, &device, 5);
            s.run();
            s.counters.install_arm_ms / s.counters.install_reads as f64
        };
        let fifo = cost(ServerKind::Absorbing);
        let sptf = cost(ServerKind::Opportunistic);
        assert!(sptf < 0.6 * fifo, "SPTF {sptf} ms against FIFO {fifo} ms");
    }
}

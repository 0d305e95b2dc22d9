//! What `amber inspect` shows of objects: the schema catalog's descriptors
//! decoded, and a page (`--page N`) or one object (`--object PAGE:OFFSET`)
//! dumped object by object, each field decoded by its stored descriptor.
//!
//! Everything here reads bytes from the file, so nothing may panic on them:
//! every read is bounds-checked, and what cannot be decoded is said so.

use crate::error::CliError;
use amber::internals::format::PageNo;
use amber::internals::format::objects::{FLAG_FREE, FLAG_MARK, ObjectEntry, walk};
use amber::internals::format::page::{
    BlockKind, HEADER_SIZE, PageHeader, USED_OFFSET, compute_checksum,
};
use amber::internals::schema::desc::{Prim, Shape, StoredField, StoredKind, StoredType, kind_name};
use amber::internals::store::Store;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Elements of an array shown before the rest is summarised.
const ELEMS: usize = 16;
/// Bytes of a byte array shown as a string before the rest is summarised.
const BYTES: usize = 256;

/// The catalog, decoded: each type id's descriptor, or why it is unreadable.
pub type Catalog = BTreeMap<u32, Result<StoredType, String>>;

/// Decodes the store's schema catalog.
pub fn catalog(s: &Store) -> Catalog {
    s.types()
        .into_iter()
        .map(|(id, b)| (id, StoredType::decode(&b)))
        .collect()
}

/// The name of type `id`, for listings.
pub fn type_name(cat: &Catalog, id: u32) -> String {
    match cat.get(&id) {
        Some(Ok(t)) => format!("`{}`", t.name),
        Some(Err(_)) => "(undecodable descriptor)".into(),
        None => "(not in the catalog)".into(),
    }
}

/// One catalog entry: the type, then its fields (offset, name, kind);
/// the fields of a nested struct follow it, indented, at their offsets in
/// the outer type.
pub fn describe_type(id: u32, t: &StoredType, out: &mut String) {
    match &t.shape {
        Shape::Struct(fields) => {
            let _ = writeln!(
                out,
                "  type {id}: {} ({} bytes, align {}), {} field(s)",
                t.name,
                t.size,
                t.align,
                fields.len()
            );
            list_fields(fields, 0, 0, out);
        }
        Shape::Array(k) => {
            let _ = writeln!(
                out,
                "  type {id}: {} (buffers of vectors and byte strings: elements of {}, {} byte(s) each)",
                t.name,
                kind_name(k),
                t.size
            );
        }
    }
}

fn list_fields(fields: &[StoredField], base: u32, depth: usize, out: &mut String) {
    for f in fields {
        let at = base + f.offset;
        let _ = writeln!(
            out,
            "    {at:>6}  {}{}: {}",
            "  ".repeat(depth),
            f.name,
            kind_name(&f.kind)
        );
        if let StoredKind::Struct { fields, .. } = &f.kind
            && depth < 8
        {
            list_fields(fields, at, depth + 1, out);
        }
    }
}

/// A persistent address as `page:offset`.
fn addr(a: u64, shift: u32) -> String {
    if a == 0 {
        "null".into()
    } else {
        format!("{}:{}", a >> shift, a & ((1u64 << shift) - 1))
    }
}

fn get<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    get::<8>(b, at).map(u64::from_le_bytes)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    get::<4>(b, at).map(u32::from_le_bytes)
}

fn prim(b: &[u8], at: usize, p: Prim) -> Option<String> {
    Some(match p {
        Prim::U8 => b.get(at)?.to_string(),
        Prim::I8 => (*b.get(at)? as i8).to_string(),
        Prim::U16 => u16::from_le_bytes(get(b, at)?).to_string(),
        Prim::I16 => i16::from_le_bytes(get(b, at)?).to_string(),
        Prim::U32 => u32::from_le_bytes(get(b, at)?).to_string(),
        Prim::I32 => i32::from_le_bytes(get(b, at)?).to_string(),
        Prim::U64 => u64::from_le_bytes(get(b, at)?).to_string(),
        Prim::I64 => i64::from_le_bytes(get(b, at)?).to_string(),
        Prim::F32 => f32::from_le_bytes(get(b, at)?).to_string(),
        Prim::F64 => f64::from_le_bytes(get(b, at)?).to_string(),
    })
}

/// Bytes as an escaped string; a run of trailing zero bytes is counted
/// instead of shown.
fn escaped(bytes: &[u8]) -> String {
    let end = bytes.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
    let shown = &bytes[..end.min(BYTES)];
    let mut s = String::from("\"");
    for &c in shown {
        s.extend(std::ascii::escape_default(c).map(char::from));
    }
    s.push('"');
    if end > BYTES {
        let _ = write!(s, " … ({} more bytes)", end - BYTES);
    }
    if end < bytes.len() {
        let _ = write!(s, " + {} zero byte(s)", bytes.len() - end);
    }
    s
}

/// Whether a value of kind `k` is shown on lines of its own.
fn multiline(k: &StoredKind) -> bool {
    match k {
        StoredKind::Struct { .. } => true,
        StoredKind::Array { elem, .. } => !matches!(**elem, StoredKind::Prim(_)),
        _ => false,
    }
}

/// `label:` then a space, unless the value follows on lines of its own.
fn label(out: &mut String, pad: &str, text: &str, k: &StoredKind) {
    let sep = if multiline(k) { "" } else { " " };
    let _ = write!(out, "{pad}{text}:{sep}");
}

/// Writes the value of kind `k` at `at` in `b`: on the same line for a
/// scalar, on following lines (at `indent`) for a struct or an array of
/// them.
fn value(b: &[u8], at: usize, k: &StoredKind, shift: u32, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    let short = "(truncated)".to_string();
    match k {
        StoredKind::Prim(p) => {
            let _ = writeln!(out, "{}", prim(b, at, *p).unwrap_or(short));
        }
        StoredKind::Array {
            elem,
            elem_size,
            len,
        } => {
            let (n, size) = (*len as usize, *elem_size as usize);
            if matches!(**elem, StoredKind::Prim(Prim::U8 | Prim::I8)) {
                let s = b.get(at..at.saturating_add(n)).map_or(short, escaped);
                let _ = writeln!(out, "{s}");
            } else if let StoredKind::Prim(p) = **elem {
                let items: Vec<String> = (0..n.min(ELEMS))
                    .map(|i| prim(b, at + i * size, p).unwrap_or_else(|| "?".into()))
                    .collect();
                let more = if n > ELEMS {
                    format!(", … ({} more)", n - ELEMS)
                } else {
                    String::new()
                };
                let _ = writeln!(out, "[{}{more}]", items.join(", "));
            } else {
                let _ = writeln!(out);
                for i in 0..n.min(ELEMS) {
                    label(out, &pad, &format!("[{i}]"), elem);
                    value(b, at + i * size, elem, shift, indent + 2, out);
                }
                if n > ELEMS {
                    let _ = writeln!(out, "{pad}… ({} more)", n - ELEMS);
                }
            }
        }
        StoredKind::Struct { fields, .. } => {
            let _ = writeln!(out);
            struct_fields(b, at, fields, shift, indent, out);
        }
        StoredKind::Ref { .. } => {
            let s = u64_at(b, at).map_or(short, |a| addr(a, shift));
            let _ = writeln!(out, "{s}");
        }
        StoredKind::Smart { .. } => {
            let s = u64_at(b, at).map_or(short, |a| format!("{} (smart)", addr(a, shift)));
            let _ = writeln!(out, "{s}");
        }
        StoredKind::Vec { .. } | StoredKind::Bytes => {
            let s = match (u64_at(b, at), u32_at(b, at + 8), u32_at(b, at + 12)) {
                (Some(buf), Some(len), Some(cap)) => {
                    format!("len {len}, cap {cap}, buffer {}", addr(buf, shift))
                }
                _ => short,
            };
            let _ = writeln!(out, "{s}");
        }
        StoredKind::Index { .. } => {
            let s = match (u64_at(b, at), u64_at(b, at + 8)) {
                (Some(root), Some(len)) => format!("len {len}, root node {}", addr(root, shift)),
                _ => short,
            };
            let _ = writeln!(out, "{s}");
        }
    }
}

fn struct_fields(
    b: &[u8],
    at: usize,
    fields: &[StoredField],
    shift: u32,
    indent: usize,
    out: &mut String,
) {
    for f in fields {
        let text = format!("{} ({}, offset {})", f.name, kind_name(&f.kind), f.offset);
        label(out, &" ".repeat(indent), &text, &f.kind);
        value(b, at + f.offset as usize, &f.kind, shift, indent + 2, out);
    }
}

/// One object of a block whose first page is `head`.
fn object(block: &[u8], head: PageNo, e: &ObjectEntry, cat: &Catalog, ps: usize, out: &mut String) {
    let shift = ps.trailing_zeros();
    let a = head * ps as u64 + e.body as u64;
    let mut flags = Vec::new();
    if e.is_free() {
        flags.push("free");
    }
    if e.flags & FLAG_MARK != 0 {
        flags.push("marked");
    }
    if e.flags & !(FLAG_FREE | FLAG_MARK) != 0 {
        flags.push("unknown flags");
    }
    let flags = if flags.is_empty() {
        String::new()
    } else {
        format!(", flags 0x{:02x} ({})", e.flags, flags.join(", "))
    };
    let _ = writeln!(
        out,
        "  object {} (header at block offset {}): type {} {}, {} bytes{flags}",
        addr(a, shift),
        e.header,
        e.type_id,
        type_name(cat, e.type_id),
        e.size
    );
    if e.is_free() {
        let _ = writeln!(
            out,
            "    (a free slot, kept for reuse by objects of its type)"
        );
        return;
    }
    let body = block.get(e.body..e.body + e.size).unwrap_or(&[]);
    match cat.get(&e.type_id) {
        Some(Ok(t)) => match &t.shape {
            Shape::Struct(fields) => {
                if (t.size as usize) > body.len() {
                    let _ = writeln!(
                        out,
                        "    (the object is {} bytes, its type {}: fields beyond it are not shown)",
                        body.len(),
                        t.size
                    );
                }
                struct_fields(body, 0, fields, shift, 4, out);
            }
            Shape::Array(k) => {
                let size = t.size.max(1);
                let n = body.len() / size as usize;
                let text = format!("{n} element(s) of {}", kind_name(k));
                label(out, "    ", &text, k);
                let as_array = StoredKind::Array {
                    elem: Box::new(k.clone()),
                    elem_size: size,
                    len: n as u32,
                };
                value(body, 0, &as_array, shift, 6, out);
            }
        },
        _ => {
            let n = body.len().min(64);
            let hex: String = body[..n].iter().map(|x| format!("{x:02x}")).collect();
            let _ = writeln!(out, "    (no descriptor) first {n} bytes: {hex}");
        }
    }
}

/// The bytes of `len` pages at page `head` in the file (zeros past its end).
fn read_raw(path: &Path, head: PageNo, len: usize, ps: usize) -> Result<Vec<u8>, CliError> {
    let f =
        std::fs::File::open(path).map_err(|e| CliError::msg(format!("{}: {e}", path.display())))?;
    let mut b = vec![0u8; len];
    let mut done = 0;
    while done < len {
        match f.read_at(&mut b[done..], head * ps as u64 + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) => {
                return Err(CliError::msg(format!(
                    "{}: reading page {head}: {e}",
                    path.display()
                )));
            }
        }
    }
    Ok(b)
}

/// A block as `inspect` shows it: the committed image (the page file's
/// copy with the log's committed changes applied), and the file's copy.
struct Block {
    head: PageNo,
    run: u32,
    image: Vec<u8>,
    file: Vec<u8>,
    damage: Option<String>,
}

/// The block holding page `page`. A damaged block is shown from the file,
/// unverified, with the error.
fn block_of(s: &Store, path: &Path, page: PageNo, out: &mut String) -> Result<Block, CliError> {
    let ps = s.page_size();
    let Some((head, run)) = s.block_of(page) else {
        let st = s.stats();
        return Err(CliError::msg(format!(
            "page {page} is not allocated (the file has pages below {}; `amber inspect {}` lists the blocks)",
            st.page_count,
            path.display()
        )));
    };
    if head != page {
        let _ = writeln!(
            out,
            "page {page} is page {} of the {run}-page block at page {head}; showing that block",
            page - head
        );
    }
    let file = read_raw(path, head, run as usize * ps, ps)?;
    match s.read_block(head) {
        Ok(image) => Ok(Block {
            head,
            run,
            image,
            file,
            damage: None,
        }),
        Err(e) if e.is_corruption() => Ok(Block {
            head,
            run,
            image: file.clone(),
            file,
            damage: Some(e.to_string()),
        }),
        Err(e) => Err(e.into()),
    }
}

/// The header lines of a block.
fn header(b: &Block, ps: usize, out: &mut String) -> Option<PageHeader> {
    if let Some(d) = &b.damage {
        let _ = writeln!(out, "DAMAGED: {d}");
        let _ = writeln!(out, "(showing the bytes in the file, unverified)");
    }
    let h = PageHeader::read(&b.image)?;
    let kind = match BlockKind::from_u8(h.kind) {
        Some(BlockKind::Data) => "data block".to_string(),
        Some(BlockKind::Meta) => "metadata blob".to_string(),
        Some(BlockKind::Raw) => "raw block (no object map)".to_string(),
        None => format!("unknown kind {}", h.kind),
    };
    let _ = writeln!(
        out,
        "page {}: {kind}, {} page(s) of {ps} bytes (run_len {}), used {} of {} bytes, page_no {}",
        b.head,
        b.run,
        h.run_len,
        h.used,
        b.image.len(),
        h.page_no
    );
    // The physical fields are the file copy's, stamped at installation.
    let f = PageHeader::read(&b.file)?;
    let file = if b.file.iter().all(|&x| x == 0) {
        "not in the page file yet".to_string()
    } else {
        let sum = compute_checksum(&b.file);
        format!(
            "in the page file: LSN {}, checksum 0x{:08x} ({})",
            f.lsn,
            f.checksum,
            if sum == f.checksum {
                "ok".to_string()
            } else {
                format!("MISMATCH, computed 0x{sum:08x}")
            }
        )
    };
    let pending = b.damage.is_none()
        && (b.image[USED_OFFSET..USED_OFFSET + 4] != b.file[USED_OFFSET..USED_OFFSET + 4]
            || b.image[HEADER_SIZE..] != b.file[HEADER_SIZE..]);
    let _ = writeln!(
        out,
        "  {file}{}",
        if pending {
            "; shown with the changes committed in the log, not yet installed"
        } else {
            ""
        }
    );
    Some(h)
}

/// The objects of a data block, optionally only the one containing block
/// offset `only`; returns how many were shown.
fn objects(
    block: &[u8],
    head: PageNo,
    h: &PageHeader,
    cat: &Catalog,
    ps: usize,
    only: Option<usize>,
    out: &mut String,
) -> usize {
    let mut shown = 0;
    for e in walk(block, h.used as usize) {
        match e {
            Ok(e) => {
                if only.is_some_and(|o| o < e.header || o >= e.end().max(e.body + 1)) {
                    continue;
                }
                object(block, head, &e, cat, ps, out);
                shown += 1;
            }
            Err(err) => {
                let _ = writeln!(out, "  DAMAGED object map: {err}");
                break;
            }
        }
    }
    shown
}

/// `amber inspect PATH --page N`.
pub fn page(s: &Store, path: &Path, page: PageNo, out: &mut String) -> Result<(), CliError> {
    let ps = s.page_size();
    let cat = catalog(s);
    let b = block_of(s, path, page, out)?;
    let (head, block) = (b.head, &b.image);
    let Some(h) = header(&b, ps, out) else {
        return Err(CliError::msg(format!(
            "page {head}: block shorter than its header"
        )));
    };
    if h.kind == BlockKind::Data as u8 {
        let mut list = String::new();
        let n = objects(block, head, &h, &cat, ps, None, &mut list);
        let _ = writeln!(
            out,
            "{n} object(s), from block offset {HEADER_SIZE} to {}",
            h.used
        );
        out.push_str(&list);
    }
    Ok(())
}

/// `amber inspect PATH --object PAGE:OFFSET`.
pub fn one_object(s: &Store, path: &Path, spec: &str, out: &mut String) -> Result<(), CliError> {
    let bad = || {
        CliError::msg(format!(
            "--object takes PAGE:OFFSET (as inspect prints addresses), not {spec:?}"
        ))
    };
    let (p, o) = spec.split_once(':').ok_or_else(bad)?;
    let page: PageNo = p.trim().parse().map_err(|_| bad())?;
    let off: u64 = o.trim().parse().map_err(|_| bad())?;
    let ps = s.page_size();
    if off >= ps as u64 {
        return Err(CliError::msg(format!(
            "offset {off} is not inside a page of {ps} bytes"
        )));
    }
    let cat = catalog(s);
    let b = block_of(s, path, page, out)?;
    let (head, block) = (b.head, &b.image);
    let Some(h) = header(&b, ps, out) else {
        return Err(CliError::msg(format!(
            "page {head}: block shorter than its header"
        )));
    };
    if h.kind != BlockKind::Data as u8 {
        return Err(CliError::msg(format!("page {head} is not a data block")));
    }
    let at = ((page - head) * ps as u64 + off) as usize;
    if objects(block, head, &h, &cat, ps, Some(at), out) == 0 {
        return Err(CliError::msg(format!(
            "no object at {page}:{off} (`amber inspect {} --page {head}` lists the block's objects)",
            path.display()
        )));
    }
    Ok(())
}

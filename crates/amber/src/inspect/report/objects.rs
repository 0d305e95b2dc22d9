//! What `amber inspect` shows of objects: the schema catalog's descriptors,
//! and a page (`--page N`) or one object (`--object PAGE:OFFSET`) dumped
//! object by object, each field as `amber::inspect` decoded it by its
//! stored descriptor.

use crate::error::{Error, Result};
use crate::inspect::{
    BLOCK_HEADER_SIZE, BlockKind, BlockView, CatalogEntry, FieldValue, FileCopy, Inspector,
    ObjectValue, ObjectView, Shape, StoredField, StoredKind, StoredType, Value, kind_name,
};
use std::fmt::Write as _;
use std::path::Path;

/// Elements of an array shown before the rest is summarised.
const ELEMS: usize = 16;
/// Bytes of a byte array shown as a string before the rest is summarised.
const BYTES: usize = 256;

/// The name of an object's type, or why there is none.
fn type_name(o: &ObjectView, cat: &[CatalogEntry]) -> String {
    match &o.type_name {
        Some(name) => format!("`{name}`"),
        None if cat.iter().any(|c| c.id == o.type_id) => "(undecodable descriptor)".into(),
        None => "(not in the catalog)".into(),
    }
}

/// One catalog entry: the type, then its fields (offset, name, kind);
/// the fields of a nested struct follow it, indented, at their offsets in
/// the outer type.
pub(super) fn describe_type(id: u32, t: &StoredType, out: &mut String) {
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
fn addr(a: u64, ps: u64) -> String {
    if a == 0 {
        "null".into()
    } else {
        format!("{}:{}", a / ps, a % ps)
    }
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

/// Whether a value is shown on lines of its own.
fn multiline(v: &Value) -> bool {
    match v {
        Value::Struct(_) => true,
        Value::Array(items) => !items
            .iter()
            .all(|i| matches!(i, Value::Scalar(_) | Value::Truncated)),
        _ => false,
    }
}

/// `label:` then a space, unless the value follows on lines of its own.
fn label(out: &mut String, pad: &str, text: &str, v: &Value) {
    let sep = if multiline(v) { "" } else { " " };
    let _ = write!(out, "{pad}{text}:{sep}");
}

/// Writes a value: on the same line for a scalar, on following lines (at
/// `indent`) for a struct or an array of them.
fn value(v: &Value, show: &Show<'_>, indent: usize, out: &mut String) {
    let ps = show.ps;
    let pad = " ".repeat(indent);
    let _ = match v {
        Value::Truncated => writeln!(out, "(truncated)"),
        Value::Scalar(x) => writeln!(out, "{x}"),
        Value::Bytes(b) => writeln!(out, "{}", escaped(b)),
        Value::Array(items) if !multiline(v) => {
            let shown: Vec<String> = items
                .iter()
                .take(ELEMS)
                .map(|i| match i {
                    Value::Scalar(x) => x.to_string(),
                    _ => "?".into(),
                })
                .collect();
            let more = if items.len() > ELEMS {
                format!(", … ({} more)", items.len() - ELEMS)
            } else {
                String::new()
            };
            writeln!(out, "[{}{more}]", shown.join(", "))
        }
        Value::Array(items) => {
            let _ = writeln!(out);
            for (i, item) in items.iter().take(ELEMS).enumerate() {
                label(out, &pad, &format!("[{i}]"), item);
                value(item, show, indent + 2, out);
            }
            if items.len() > ELEMS {
                let _ = writeln!(out, "{pad}… ({} more)", items.len() - ELEMS);
            }
            Ok(())
        }
        Value::Struct(fields) => {
            let _ = writeln!(out);
            struct_fields(fields, show, indent, out);
            Ok(())
        }
        Value::Ref(a) => writeln!(out, "{}", addr(*a, ps)),
        Value::Smart(a) => writeln!(out, "{} (smart)", addr(*a, ps)),
        Value::Lazy(a) => writeln!(out, "{} (lazy)", addr(*a, ps)),
        Value::Vector { buffer, len, cap } => {
            writeln!(out, "len {len}, cap {cap}, buffer {}", addr(*buffer, ps))
        }
        Value::Index { root, len } => writeln!(out, "len {len}, root node {}", addr(*root, ps)),
    };
}

fn struct_fields(fields: &[FieldValue], show: &Show<'_>, indent: usize, out: &mut String) {
    for f in fields {
        let text = format!("{} ({}, offset {})", f.name, kind_name(&f.kind), f.offset);
        label(out, &" ".repeat(indent), &text, &f.value);
        value(&f.value, show, indent + 2, out);
        if let (StoredKind::Str | StoredKind::Bytes, Value::Vector { buffer, len, .. }) =
            (&f.kind, &f.value)
        {
            let pad = " ".repeat(indent + 2);
            let _ = writeln!(out, "{pad}{}", show.contents(*buffer, *len));
        }
    }
}

/// What showing a value needs: the page size (addresses are shown as
/// page:offset) and the database, to show a string's or byte string's
/// contents from its buffer.
struct Show<'a> {
    ps: u64,
    s: &'a Inspector,
}

impl Show<'_> {
    /// The first bytes of the buffer at `buffer` (`len` of them are the
    /// value), escaped, or why they cannot be shown.
    fn contents(&self, buffer: u64, len: u32) -> String {
        if buffer == 0 {
            return "contents: (empty)".into();
        }
        let o = match self.s.object(buffer) {
            Ok(o) => o,
            Err(e) => return format!("contents: unreadable ({e})"),
        };
        let ObjectValue::Array {
            elements: Value::Bytes(b),
            ..
        } = &o.value
        else {
            return "contents: the buffer is not a byte array".into();
        };
        let n = (len as usize).min(b.len());
        let shown = n.min(TEXT);
        let more = if n > shown {
            format!(" … ({} more bytes)", n - shown)
        } else {
            String::new()
        };
        format!("contents: {}{more}", escaped(&b[..shown]))
    }
}

/// Bytes of a string shown.
const TEXT: usize = 120;

/// One object.
fn object(o: &ObjectView, cat: &[CatalogEntry], show: &Show<'_>, out: &mut String) {
    let ps = show.ps;
    let mut flags = Vec::new();
    if o.is_free() {
        flags.push("free");
    }
    if o.is_marked() {
        flags.push("marked");
    }
    if o.unknown_flags() != 0 {
        flags.push("unknown flags");
    }
    let flags = if flags.is_empty() {
        String::new()
    } else {
        format!(", flags 0x{:02x} ({})", o.flags, flags.join(", "))
    };
    let _ = writeln!(
        out,
        "  object {} (header at block offset {}): type {} {}, {} bytes{flags}",
        addr(o.addr, ps),
        o.header_offset,
        o.type_id,
        type_name(o, cat),
        o.size
    );
    match &o.value {
        ObjectValue::Free => {
            let _ = writeln!(
                out,
                "    (freed: its space is reclaimed by `amber gc`; pointers to it are refused as dangling)"
            );
        }
        ObjectValue::Struct { type_size, fields } => {
            if *type_size as usize > o.size {
                let _ = writeln!(
                    out,
                    "    (the object is {} bytes, its type {type_size}: fields beyond it are not shown)",
                    o.size
                );
            }
            struct_fields(fields, show, 4, out);
        }
        ObjectValue::Array {
            elem,
            count,
            elements,
        } => {
            let text = format!("{count} element(s) of {}", kind_name(elem));
            label(out, "    ", &text, elements);
            value(elements, show, 6, out);
        }
        ObjectValue::NoDescriptor { first_bytes } => {
            let hex: String = first_bytes.iter().map(|x| format!("{x:02x}")).collect();
            let _ = writeln!(
                out,
                "    (no descriptor) first {} bytes: {hex}",
                first_bytes.len()
            );
        }
    }
}

/// The block holding `page`, with a line saying so when `page` is not its
/// first.
fn block_of(s: &Inspector, path: &Path, page: u64, out: &mut String) -> Result<BlockView> {
    let Some(ext) = s.block_of(page) else {
        return Err(Error::invalid(format!(
            "page {page} is not allocated (the file has pages below {}; `amber inspect {}` lists the blocks)",
            s.stats().page_count,
            path.display()
        )));
    };
    if ext.start != page {
        let _ = writeln!(
            out,
            "page {page} is page {} of the {}-page block at page {}; showing that block",
            page - ext.start,
            ext.pages,
            ext.start
        );
    }
    s.block(page)
}

/// The header lines of a block.
fn header(b: &BlockView, ps: usize, out: &mut String) {
    if let Some(d) = &b.damage {
        let _ = writeln!(out, "DAMAGED: {d}");
        let _ = writeln!(out, "(showing the bytes in the file, unverified)");
    }
    let h = &b.header;
    let kind = match b.kind() {
        Some(BlockKind::Data) => "data block".to_string(),
        Some(BlockKind::Meta) => "metadata blob".to_string(),
        Some(BlockKind::Raw) => "raw block (no object map)".to_string(),
        None => format!("unknown kind {}", h.kind),
    };
    let _ = writeln!(
        out,
        "page {}: {kind}, {} page(s) of {ps} bytes (run_len {}), used {} of {} bytes, page_no {}",
        b.extent.start,
        b.extent.pages,
        h.run_len,
        h.used,
        b.extent.pages as usize * ps,
        h.page_no
    );
    let file = match b.file {
        FileCopy::NotWritten => "not in the page file yet".to_string(),
        FileCopy::Written {
            lsn,
            checksum,
            computed,
        } => format!(
            "in the page file: LSN {lsn}, checksum 0x{checksum:08x} ({})",
            if computed == checksum {
                "ok".to_string()
            } else {
                format!("MISMATCH, computed 0x{computed:08x}")
            }
        ),
    };
    let _ = writeln!(
        out,
        "  {file}{}",
        if b.pending {
            "; shown with the changes committed in the log, not yet installed"
        } else {
            ""
        }
    );
}

/// The objects of a block, then where its map is damaged.
fn objects<'a>(
    b: &BlockView,
    list: impl IntoIterator<Item = &'a ObjectView>,
    cat: &[CatalogEntry],
    show: &Show<'_>,
    out: &mut String,
) {
    for o in list {
        object(o, cat, show, out);
    }
    if let Some(e) = &b.map_damage {
        let _ = writeln!(out, "  DAMAGED object map: {e}");
    }
}

/// `amber inspect PATH --page N`.
pub(super) fn page(s: &Inspector, path: &Path, page: u64, out: &mut String) -> Result<()> {
    let ps = s.page_size();
    let cat = s.catalog();
    let b = block_of(s, path, page, out)?;
    header(&b, ps, out);
    if b.kind() == Some(BlockKind::Data) {
        let _ = writeln!(
            out,
            "{} object(s), from block offset {} to {}",
            b.objects.len(),
            BLOCK_HEADER_SIZE,
            b.header.used
        );
        let show = Show { ps: ps as u64, s };
        objects(&b, &b.objects, &cat, &show, out);
    }
    Ok(())
}

/// `amber inspect PATH --object PAGE:OFFSET`.
pub(super) fn one_object(s: &Inspector, path: &Path, spec: &str, out: &mut String) -> Result<()> {
    let bad = || {
        Error::invalid(format!(
            "--object takes PAGE:OFFSET (as inspect prints addresses), not {spec:?}"
        ))
    };
    let (p, o) = spec.split_once(':').ok_or_else(bad)?;
    let page: u64 = p.trim().parse().map_err(|_| bad())?;
    let off: u64 = o.trim().parse().map_err(|_| bad())?;
    let ps = s.page_size();
    if off >= ps as u64 {
        return Err(Error::invalid(format!(
            "offset {off} is not inside a page of {ps} bytes"
        )));
    }
    let cat = s.catalog();
    let b = block_of(s, path, page, out)?;
    header(&b, ps, out);
    let head = b.extent.start;
    if b.kind() != Some(BlockKind::Data) {
        return Err(Error::invalid(format!("page {head} is not a data block")));
    }
    let at = ((page - head) * ps as u64 + off) as usize;
    let Some(o) = b.object_at(at) else {
        return Err(Error::invalid(format!(
            "no object at {page}:{off} (`amber inspect {} --page {head}` lists the block's objects)",
            path.display()
        )));
    };
    objects(&b, [o], &cat, &Show { ps: ps as u64, s }, out);
    Ok(())
}

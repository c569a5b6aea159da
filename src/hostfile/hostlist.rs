//! Slurm hostlist expressions (`node[01-04,07]`, `n[1-2],gpu7`): their size
//! counted before anything expands, their names in order, and a host
//! named twice found although the parser drops repeats.

use std::collections::HashSet;

use super::{shorten, validate_name, Problem, MAX_HOSTS, MAX_NAME};

/// Expands a Slurm hostlist expression into at most `room` names, in its
/// order; a plain name expands to itself. Its size is counted before
/// anything expands, and a host it names twice is refused.
pub(super) fn expand_hostlist(expr: &str, room: usize) -> Result<Vec<String>, Problem> {
    if !expr.contains('[') && !expr.contains(',') {
        validate_name(expr)?;
        return match room {
            0 => Err(Problem::HostPastLimit { name: expr.to_string() }),
            _ => Ok(vec![expr.to_string()]),
        };
    }
    let size = hostlist_size(expr);
    if size.names > room as u64 {
        return Err(Problem::TooManyNames { expr: shorten(expr), names: size.names, before: MAX_HOSTS - room });
    }
    if size.longest > MAX_NAME {
        return Err(Problem::NamesTooLong { expr: shorten(expr) });
    }
    let names = parse_hostlist(expr)?;
    // The parser drops repeats: fewer names than counted is one named twice.
    if (names.len() as u64) < size.names {
        if let Some(host) = repeated_name(expr)? {
            return Err(Problem::Repeated { expr: shorten(expr), host });
        }
    }
    names.iter().try_for_each(|n| validate_name(n))?;
    Ok(names)
}

fn parse_hostlist(expr: &str) -> Result<Vec<String>, Problem> {
    hostlist_parser::parse(expr).map_err(|e| {
        let detail = e.to_string().lines().next().unwrap_or_default().to_string();
        Problem::BadHostlist { expr: shorten(expr), detail }
    })
}

/// The first host `expr` names twice: its top-level lists (`n[1-2],n1`)
/// are expanded one at a time, and so is each item of each bracket of a
/// list (`n[1-2,2]`), since the parser drops a repeat within what it expands.
fn repeated_name(expr: &str) -> Result<Option<String>, Problem> {
    let mut seen = HashSet::new();
    for list in top_level_lists(expr) {
        let names = parse_hostlist(list)?;
        if let Some(repeat) = names.iter().find(|n| seen.contains(*n)) {
            return Ok(Some(repeat.clone()));
        }
        if let Some(repeat) = repeated_in_brackets(list)? {
            return Ok(Some(repeat));
        }
        seen.extend(names);
    }
    Ok(None)
}

/// A host two items of one bracket of `list` both name (`n[1-2,2]`: `n2`).
fn repeated_in_brackets(list: &str) -> Result<Option<String>, Problem> {
    let mut from = 0;
    while let Some(open) = list[from..].find('[').map(|at| from + at) {
        let Some(close) = list[open..].find(']').map(|at| open + at) else { break };
        let mut seen = HashSet::new();
        for item in list[open + 1..close].split(',') {
            let alone = format!("{}[{item}]{}", &list[..open], &list[close + 1..]);
            if let Some(repeat) = parse_hostlist(&alone)?.into_iter().find(|name| !seen.insert(name.clone())) {
                return Ok(Some(repeat));
            }
        }
        from = close + 1;
    }
    Ok(None)
}

/// What a hostlist expression expands to, at most: how many names
/// (duplicates counted, saturating) and the longest one's length.
struct HostlistSize {
    names: u64,
    longest: usize,
}

/// Counts without expanding: `node[1-4]x[1,3]` is 4 × 2 names; the lists
/// separated by top-level commas add up. What the parser would refuse is
/// counted as one name, and then refused by the parser.
fn hostlist_size(expr: &str) -> HostlistSize {
    let mut total = HostlistSize { names: 0, longest: 0 };
    for list in top_level_lists(expr) {
        let (mut names, mut longest) = (1u64, 0usize);
        let mut rest = list;
        while let Some(open) = rest.find('[') {
            longest += open;
            let (inside, after) = rest[open + 1..].split_once(']').unwrap_or((&rest[open + 1..], ""));
            let items = inside.split(',').map(str::trim);
            names = names.saturating_mul(items.clone().map(range_len).fold(0, u64::saturating_add));
            longest += items.map(item_width).max().unwrap_or(0);
            rest = after;
        }
        total.names = total.names.saturating_add(names);
        total.longest = total.longest.max(longest + rest.len());
    }
    total
}

/// `node[1-2],gpu[1-4]` is `node[1-2]` and `gpu[1-4]`: commas outside brackets.
fn top_level_lists(expr: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0i32;
    expr.split(move |c| {
        depth += match c {
            '[' => 1,
            ']' => -1,
            _ => 0,
        };
        c == ',' && depth <= 0
    })
}

/// Names in one bracket item: `7` is one, `01-10` ten.
fn range_len(item: &str) -> u64 {
    let bounds = item.split_once('-').map(|(a, b)| (a.trim().parse::<u64>(), b.trim().parse::<u64>()));
    match bounds {
        Some((Ok(a), Ok(b))) => a.abs_diff(b).saturating_add(1),
        _ => 1,
    }
}

/// Characters one bracket item puts in a name: `01-10` two.
fn item_width(item: &str) -> usize {
    item.split_once('-').map_or(item.len(), |(a, b)| a.trim().len().max(b.trim().len()))
}

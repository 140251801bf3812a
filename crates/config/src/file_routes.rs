//! `router.route_file`: the static routes of a large table, one line each (the format of
//! [`crate::routefile`]), validated as `[[route]]` tables are and appended to them.
//!
//! The file is read and checked in one pass, each route handed straight to the config's list:
//! a full Internet table is never held twice. Errors name the route file's line and column.

use std::path::Path;

use crate::context::{Ctx, Origin};
use crate::route_checks::{Seen, interface_route_problem, on_link, via_problem};
use crate::routefile::{self, FileRoute};
use crate::{ConfigError, Interface, Route};

/// Reads `file` and appends its routes to `routes`; `seen` holds the prefixes defined so far.
pub(crate) fn add(
    cx: &Ctx,
    ifaces: &[Interface],
    file: &Path,
    seen: &mut Seen,
    routes: &mut Vec<Route>,
) -> Result<(), ConfigError> {
    let text = crate::read(file).map_err(|e| ConfigError {
        message: format!("router.route_file (set in {}): {}", cx.path().display(), e.message),
        ..e
    })?;
    routes.reserve(text.len() / 28);
    seen.reserve(text.len() / 28);
    // Interface names are shared by many routes: one allocation per name, cloned (cheaply:
    // they are short) into each route.
    routefile::for_each(&text, file, |r| {
        let err = |column: u32, message: String| ConfigError {
            path: file.to_owned(),
            line: r.line,
            column: column.max(1) as usize,
            message,
        };
        // Messages are formatted only for an error: a full table comes through here a million
        // times.
        if let Some(&first) = seen.get(&r.prefix) {
            return Err(err(
                1,
                format!(
                    "duplicate route {} (first defined at {})",
                    r.prefix,
                    cx.describe(first, file)
                ),
            ));
        }
        if let Some(problem) = interface_route_problem(ifaces, &r.prefix) {
            return Err(err(1, format!("route {} {problem}", r.prefix)));
        }
        let interface = interface(ifaces, &r)
            .map_err(|(column, msg)| err(column, format!("route {}: {msg}", r.prefix)))?;
        seen.insert(r.prefix, Origin::File(r.line));
        routes.push(Route { prefix: r.prefix, via: r.next_hop, interface, also_via: Vec::new() });
        Ok(())
    })
}

/// The route's interface: the one named with `dev`, else the one whose prefix holds the next
/// hop; an error is the column to point at and the problem.
fn interface(ifaces: &[Interface], r: &FileRoute) -> Result<String, (u32, String)> {
    if let Some(via) = &r.next_hop
        && let Some(problem) = via_problem(ifaces, &r.prefix, via)
    {
        return Err((r.next_hop_column, problem));
    }
    match (&r.interface, &r.next_hop) {
        (Some(name), _) => match ifaces.iter().find(|i| i.name == *name) {
            Some(i) => Ok(i.name.clone()),
            None => {
                let known: Vec<String> = ifaces.iter().map(|i| format!("{:?}", i.name)).collect();
                Err((r.interface_column, format!("interface {name:?} is not defined in the config (defined: {})", known.join(", "))))
            }
        },
        (None, Some(via)) => on_link(ifaces, via).map(|i| i.name.clone()).ok_or_else(|| {
            (r.next_hop_column, format!("via {via} is not on-link on any interface (no interface address prefix contains it); add `dev INTERFACE` to the line"))
        }),
        (None, None) => unreachable!("the route file parser gives every route a next hop or an interface"),
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use crate::{Config, ConfigError};

    const BASE: &str = "[router]\nroute_file = \"routes.txt\"\n\
        [[interface]]\nname = \"lr-a\"\naddresses = [\"198.18.0.1/24\", \"2001:db8:a::1/64\"]\n\
        [[interface]]\nname = \"lr-b\"\naddresses = [\"198.19.0.1/24\"]\n";

    /// A config (`BASE` + `extra`) and a route file in a directory of their own.
    fn load(test: &str, extra: &str, routes: &str) -> Result<Config, ConfigError> {
        let dir = std::env::temp_dir().join(format!("lr-cfg-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("routes.txt"), routes).unwrap();
        std::fs::write(dir.join("router.toml"), format!("{BASE}{extra}")).unwrap();
        let res = Config::load(&dir.join("router.toml"));
        std::fs::remove_dir_all(&dir).unwrap();
        res
    }

    #[track_caller]
    fn fails(test: &str, extra: &str, routes: &str, at: (&str, usize, usize), frag: &str) {
        let e = load(test, extra, routes).expect_err("should be rejected");
        assert_eq!((e.path.file_name().unwrap().to_str().unwrap(), e.line, e.column), at, "{e}");
        assert!(e.message.contains(frag), "{e} lacks {frag:?}");
    }

    #[test]
    fn routes_follow_the_tables_with_their_interfaces() {
        let extra = "[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"198.19.0.9\"\n";
        let c = load("ok", extra, "# table\n10.1.0.0/16 198.18.0.2\n2001:db8:1::/48 fe80::1 dev lr-a\n192.0.2.0/24 dev lr-b\n").unwrap();
        let got: Vec<(String, Option<IpAddr>, &str)> =
            c.routes.iter().map(|r| (r.prefix.to_string(), r.via, r.interface.as_str())).collect();
        let want = [
            ("10.0.0.0/8", Some("198.19.0.9"), "lr-b"),
            ("10.1.0.0/16", Some("198.18.0.2"), "lr-a"),
            ("2001:db8:1::/48", Some("fe80::1"), "lr-a"),
            ("192.0.2.0/24", None, "lr-b"),
        ];
        let want: Vec<(String, Option<IpAddr>, &str)> = want
            .iter()
            .map(|&(p, v, i)| (p.to_owned(), v.map(|v| v.parse().unwrap()), i))
            .collect();
        assert_eq!(got, want);
        assert_eq!(
            c.router.route_file.as_ref().and_then(|p| p.file_name()),
            Some(std::ffi::OsStr::new("routes.txt"))
        );
    }

    #[test]
    fn errors_name_the_route_file() {
        fails(
            "offlink",
            "",
            "\n10.0.0.0/8   192.0.2.1\n",
            ("routes.txt", 2, 14),
            "route 10.0.0.0/8: via 192.0.2.1 is not on-link on any interface",
        );
        fails(
            "unknown",
            "",
            "10.0.0.0/8 dev lr-x\n",
            ("routes.txt", 1, 16),
            "interface \"lr-x\" is not defined in the config",
        );
        fails(
            "own",
            "",
            "10.0.0.0/8 198.18.0.1\n",
            ("routes.txt", 1, 12),
            "via 198.18.0.1 is this router's own address on interface \"lr-a\"",
        );
        fails("syntax", "", "10.0.0.0/8\n", ("routes.txt", 1, 11), "has no next hop");
        fails(
            "dup",
            "",
            "10.0.0.0/8 198.18.0.2\n10.0.0.0/8 198.18.0.3\n",
            ("routes.txt", 2, 1),
            "duplicate route 10.0.0.0/8 (first defined at ",
        );
        let extra = "[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"198.19.0.9\"\n";
        fails(
            "dup-table",
            extra,
            "10.0.0.0/8 198.18.0.2\n",
            ("routes.txt", 1, 1),
            "router.toml line 10)",
        );
    }

    #[test]
    fn missing_file_names_the_key() {
        let dir = std::env::temp_dir().join(format!("lr-cfg-nofile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("router.toml"), BASE).unwrap();
        let e = Config::load(&dir.join("router.toml")).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(e.path, dir.join("routes.txt"));
        assert!(
            e.to_string().contains("router.route_file (set in ")
                && e.to_string().contains("cannot read"),
            "{e}"
        );
    }
}

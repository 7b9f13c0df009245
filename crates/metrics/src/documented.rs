//! podscoped(8)'s METRICS section held to the catalog, as the D-Bus
//! surface is held to it (podscoped's `bus::documented`): each family's
//! entry names it, its type and labels, and says its help; the page names
//! no family the catalog does not have.

use crate::catalog::ALL;

const MAN: &str = include_str!("../../../man/podscoped.8");

/// The page's METRICS section, groff's `\-` and `\\` read as `-` and `\`.
fn metrics_section() -> String {
    let man = MAN.replace("\\-", "-").replace("\\\\", "\\");
    let start = man
        .find("\n.SH METRICS\n")
        .expect("podscoped(8) has a METRICS section");
    let body = &man[start + 1..];
    let end = body[4..].find("\n.SH ").map_or(body.len(), |e| e + 4);
    body[..end].to_owned()
}

#[test]
fn every_family_is_in_podscoped_8_as_the_catalog_declares_it() {
    let section = metrics_section();
    let lines: Vec<&str> = section.lines().collect();
    for f in ALL {
        let mut head = f.kind.as_str().to_owned();
        if !f.labels.is_empty() {
            head.push_str("; ");
            head.push_str(&f.labels.join(", "));
        }
        let entry = format!(".BR {} \" ({head})\"", f.name);
        let at = lines
            .iter()
            .position(|l| *l == entry)
            .unwrap_or_else(|| panic!("podscoped(8), METRICS: no entry `{entry}`"));
        let text = lines.get(at + 1).copied().unwrap_or("");
        assert!(
            text.starts_with(f.help),
            "podscoped(8), METRICS, {}: says\n  {text}\nwhere the catalog says\n  {}",
            f.name,
            f.help
        );
    }
    for l in lines.iter().filter(|l| l.starts_with(".BR podscope_")) {
        let name = l[4..].split(' ').next().unwrap();
        assert!(
            ALL.iter().any(|f| f.name == name),
            "podscoped(8), METRICS, names {name}, which is no family"
        );
    }
}

//! Who a container runs as, resolved as containerd 1.6's CRI plugin does it
//! (`oci.WithUser`, `WithUserID`, `WithUsername`, `WithAdditionalGIDs` and
//! the CRI `WithSupplementalGroups`) against the image's `/etc/passwd` and
//! `/etc/group`, whose text the caller reads from the rootfs and passes in.
//!
//! The user is CRI's `run_as_user`, else `run_as_username`, else the
//! image's `User` ("", "uid", "uid:gid", "name", "name:group", "uid:group",
//! "name:gid"). A name must exist in the image; a bare uid need not (an
//! image may run as any number), its gid is then 0. The primary gid is
//! `run_as_group`, else the group in the user spec, else the user's passwd
//! gid, else 0. The additional gids are the groups `/etc/group` lists the
//! user's name in, then `supplemental_groups`.

/// What CRI's security context and the image's config say about the user.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserRequest {
    pub run_as_user: Option<u32>,
    pub run_as_username: Option<String>,
    pub run_as_group: Option<u32>,
    pub supplemental_groups: Vec<u32>,
    /// SupplementalGroupsPolicy Strict: the image's /etc/group gives no
    /// groups.
    pub strict_groups: bool,
    /// The image config's `User`, "" when it has none.
    pub image_user: String,
}

/// The resolved identity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resolved {
    pub uid: u32,
    pub gid: u32,
    /// Groups besides `gid`, in order of appearance (`/etc/group` first,
    /// then `supplemental_groups`), without duplicates or `gid` itself.
    pub additional_gids: Vec<u32>,
    /// The user's home directory from `/etc/passwd`, for `HOME`.
    pub home: Option<String>,
}

impl Resolved {
    /// The list for the spec's `process.user.additionalGids`: `gid` and
    /// the additional gids, sorted. containerd since 1.6.18 puts the
    /// primary gid in the list (CVE-2023-25173: without it the process
    /// keeps whatever supplementary groups the runtime had, or none, so a
    /// `chmod g-r` file meant to keep the group out does not), and sorts it,
    /// so `id` prints what it prints under containerd.
    pub fn spec_additional_gids(&self) -> Vec<u32> {
        let mut gids = self.additional_gids.clone();
        gids.push(self.gid);
        gids.sort_unstable();
        gids.dedup();
        gids
    }
}

/// runc's (and so containerd's) limit on ids: the kernel allows up to
/// 2^32-2, runc only up to i32::MAX.
const ID_MAX: u32 = i32::MAX as u32;

/// One `/etc/passwd` line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PasswdEntry<'a> {
    name: &'a str,
    uid: u32,
    gid: u32,
    home: &'a str,
}

/// One `/etc/group` line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct GroupEntry<'a> {
    name: &'a str,
    gid: u32,
    members: Vec<&'a str>,
}

/// The lines worth reading: not blank, not comments, not NIS `+`/`-`
/// compat entries.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty())
        .filter(|l| !l.starts_with(['#', '+', '-']))
}

/// `name:password:uid:gid:gecos:home:shell`; lines without a name or with
/// a bad uid or gid are skipped (the C library skips them too).
fn parse_passwd(text: &str) -> Vec<PasswdEntry<'_>> {
    lines(text)
        .filter_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() < 4 || f[0].is_empty() {
                return None;
            }
            Some(PasswdEntry {
                name: f[0],
                uid: f[2].parse().ok()?,
                gid: f[3].parse().ok()?,
                home: f.get(5).copied().unwrap_or(""),
            })
        })
        .collect()
}

/// `name:password:gid:member,member`; lines without a name or with a bad
/// gid are skipped.
fn parse_group(text: &str) -> Vec<GroupEntry<'_>> {
    lines(text)
        .filter_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() < 3 || f[0].is_empty() {
                return None;
            }
            Some(GroupEntry {
                name: f[0],
                gid: f[2].parse().ok()?,
                members: f
                    .get(3)
                    .map(|m| {
                        m.split(',')
                            .map(str::trim)
                            .filter(|m| !m.is_empty())
                            .collect()
                    })
                    .unwrap_or_default(),
            })
        })
        .collect()
}

/// A user or group as a spec names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Id<'a> {
    Number(u32),
    Name(&'a str),
}

/// Where the user came from, for errors.
fn source(req: &UserRequest) -> String {
    if req.run_as_user.is_some() {
        "run_as_user".to_owned()
    } else if req
        .run_as_username
        .as_deref()
        .is_some_and(|n| !n.is_empty())
    {
        "run_as_username".to_owned()
    } else {
        format!("the image's User {:?}", req.image_user)
    }
}

/// A number as containerd reads one (all digits, at most i32::MAX) or else
/// a name. `what` says what it is ("user", "group") for errors.
fn id<'a>(text: &'a str, what: &str, from: &str) -> Result<Id<'a>, String> {
    if text.is_empty() {
        return Err(format!("{from}: empty {what}"));
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(Id::Name(text));
    }
    match text.parse::<u32>() {
        Ok(n) if n <= ID_MAX => Ok(Id::Number(n)),
        _ => Err(format!("{from}: {what} id {text} is above {ID_MAX}")),
    }
}

fn check_id(n: u32, field: &str) -> Result<u32, String> {
    if n > ID_MAX {
        return Err(format!("{field}: {n} is above {ID_MAX}"));
    }
    Ok(n)
}

/// Resolve `req` against the image's `/etc/passwd` and `/etc/group` texts
/// (None: the image has no such file).
pub fn resolve(
    req: &UserRequest,
    passwd: Option<&str>,
    group: Option<&str>,
) -> Result<Resolved, String> {
    let username = req.run_as_username.as_deref().filter(|n| !n.is_empty());
    if req.run_as_group.is_some() && req.run_as_user.is_none() && username.is_none() {
        return Err("run_as_group requires run_as_user or run_as_username".to_owned());
    }
    let from = source(req);

    // The user and the group named with it (None: the user's own).
    let (user, group_id): (Id, Option<Id>) = if let Some(uid) = req.run_as_user {
        (Id::Number(check_id(uid, "run_as_user")?), None)
    } else if let Some(name) = username {
        (Id::Name(name), None)
    } else if req.image_user.is_empty() {
        // No user anywhere: root, with root's gid (containerd does not
        // look it up either).
        (Id::Number(0), Some(Id::Number(0)))
    } else {
        let mut parts = req.image_user.split(':');
        let user = id(parts.next().unwrap_or_default(), "user", &from)?;
        let group = parts.next().map(|g| id(g, "group", &from)).transpose()?;
        if parts.next().is_some() {
            return Err(format!("{from}: more than one ':'"));
        }
        (user, group)
    };
    let group_id = match req.run_as_group {
        Some(gid) => Some(Id::Number(check_id(gid, "run_as_group")?)),
        None => group_id,
    };

    let users = passwd.map(parse_passwd).unwrap_or_default();
    let (uid, entry) = match user {
        Id::Number(uid) => (uid, users.iter().find(|u| u.uid == uid)),
        Id::Name(name) => {
            if passwd.is_none() {
                return Err(format!(
                    "{from}: the image has no user {name:?}: it has no /etc/passwd"
                ));
            }
            let e = users
                .iter()
                .find(|u| u.name == name)
                .ok_or_else(|| format!("{from}: the image has no user {name:?} in /etc/passwd"))?;
            if e.uid > ID_MAX {
                return Err(format!(
                    "{from}: /etc/passwd gives {name:?} uid {}, above {ID_MAX}",
                    e.uid
                ));
            }
            (e.uid, Some(e))
        }
    };

    let groups = group.map(parse_group).unwrap_or_default();
    let gid = match group_id {
        Some(Id::Number(gid)) => gid,
        Some(Id::Name(name)) => {
            if group.is_none() {
                return Err(format!(
                    "{from}: the image has no group {name:?}: it has no /etc/group"
                ));
            }
            groups
                .iter()
                .find(|g| g.name == name)
                .map(|g| g.gid)
                .ok_or_else(|| format!("{from}: the image has no group {name:?} in /etc/group"))?
        }
        None => entry.map(|e| e.gid).unwrap_or(0),
    };
    if gid > ID_MAX {
        return Err(format!(
            "{from}: gid {gid} (from the image) is above {ID_MAX}"
        ));
    }

    // Memberships go by name; a bare uid the image does not know has none.
    let name = match user {
        Id::Name(name) => Some(name),
        Id::Number(_) => entry.map(|e| e.name),
    };
    let mut additional_gids = Vec::new();
    let mut add = |g: u32| {
        if g != gid && !additional_gids.contains(&g) {
            additional_gids.push(g);
        }
    };
    if let Some(name) = name.filter(|_| !req.strict_groups) {
        groups
            .iter()
            // A group named after the user is its own group, not a
            // supplementary one (containerd skips it too).
            .filter(|g| g.name != name && g.members.contains(&name) && g.gid <= ID_MAX)
            .for_each(|g| add(g.gid));
    }
    for (i, &g) in req.supplemental_groups.iter().enumerate() {
        add(check_id(g, &format!("supplemental_groups[{i}]"))?);
    }

    Ok(Resolved {
        uid,
        gid,
        additional_gids,
        home: entry
            .map(|e| e.home)
            .filter(|h| !h.is_empty())
            .map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "\
# the image's users
root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin

www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin
user1:x:1000:1000::/home/user1:/bin/sh
broken line without colons
badid:x:notanumber:5::/:/bin/sh
+nisuser::::::
nohome:x:1001:1001
";

    const GROUP: &str = "\
root:x:0:root
daemon:x:1:
wheel:x:10:root,user1
www-data:x:33:
user1:x:1000:user1
group1:x:50000:user1
web:x:1004:www-data, user1
# comment:x:7:user1
bad:x:zz:user1
";

    fn resolve_image(user: &str) -> Result<Resolved, String> {
        let req = UserRequest {
            image_user: user.into(),
            ..UserRequest::default()
        };
        resolve(&req, Some(PASSWD), Some(GROUP))
    }

    #[test]
    fn no_user_anywhere_is_root() {
        let r = resolve_image("").unwrap();
        assert_eq!((r.uid, r.gid), (0, 0));
        assert_eq!(r.additional_gids, [10]);
        assert_eq!(r.home.as_deref(), Some("/root"));
        assert_eq!(r.spec_additional_gids(), [0, 10]);
        // Without the files too.
        let r = resolve(&UserRequest::default(), None, None).unwrap();
        assert_eq!(r, Resolved::default());
    }

    #[test]
    fn image_uid_not_in_passwd() {
        // critest: an image whose User is "1002".
        let r = resolve_image("1002").unwrap();
        assert_eq!((r.uid, r.gid), (1002, 0));
        assert!(r.additional_gids.is_empty());
        assert_eq!(r.home, None);
        assert_eq!(r.spec_additional_gids(), [0]);
    }

    #[test]
    fn image_uid_in_passwd_takes_its_gid_and_groups() {
        // critest: uid 1000 listed by name in group 50000.
        let r = resolve_image("1000").unwrap();
        assert_eq!((r.uid, r.gid), (1000, 1000));
        assert_eq!(r.additional_gids, [10, 50000, 1004]);
        assert_eq!(r.home.as_deref(), Some("/home/user1"));
        assert_eq!(r.spec_additional_gids(), [10, 1000, 1004, 50000]);
    }

    #[test]
    fn image_user_name() {
        // critest: "www-data".
        let r = resolve_image("www-data").unwrap();
        assert_eq!((r.uid, r.gid), (33, 33));
        assert_eq!(r.additional_gids, [1004]);
        assert_eq!(r.home.as_deref(), Some("/var/www"));
    }

    #[test]
    fn image_uid_and_gid() {
        // critest: "1003:1004"; neither needs to exist.
        let r = resolve_image("1003:1004").unwrap();
        assert_eq!((r.uid, r.gid), (1003, 1004));
        assert!(r.additional_gids.is_empty());
        assert_eq!(r.spec_additional_gids(), [1004]);
        let r = resolve(
            &UserRequest {
                image_user: "1003:1004".into(),
                ..UserRequest::default()
            },
            None,
            None,
        )
        .unwrap();
        assert_eq!((r.uid, r.gid), (1003, 1004));
    }

    #[test]
    fn image_name_and_gid() {
        // critest: "www-data:1004".
        let r = resolve_image("www-data:1004").unwrap();
        assert_eq!((r.uid, r.gid), (33, 1004));
        // 1004 (web) lists www-data but is the primary gid now.
        assert!(r.additional_gids.is_empty());
    }

    #[test]
    fn image_name_and_group_name() {
        let r = resolve_image("user1:web").unwrap();
        assert_eq!((r.uid, r.gid), (1000, 1004));
        assert_eq!(r.additional_gids, [10, 50000]);
    }

    #[test]
    fn image_uid_and_group_name() {
        let r = resolve_image("1002:wheel").unwrap();
        assert_eq!((r.uid, r.gid), (1002, 10));
        let e = resolve_image("1002:nogroup").unwrap_err();
        assert!(e.contains("\"nogroup\"") && e.contains("/etc/group"), "{e}");
        let req = UserRequest {
            image_user: "1002:wheel".into(),
            ..UserRequest::default()
        };
        let e = resolve(&req, Some(PASSWD), None).unwrap_err();
        assert!(e.contains("no /etc/group"), "{e}");
    }

    #[test]
    fn unknown_name_is_an_error_naming_it() {
        let e = resolve_image("nobody").unwrap_err();
        assert!(e.contains("\"nobody\""), "{e}");
        assert!(e.contains("the image has no user"), "{e}");
        assert!(e.contains("User \"nobody\""), "{e}");
        let req = UserRequest {
            image_user: "www-data".into(),
            ..UserRequest::default()
        };
        let e = resolve(&req, None, Some(GROUP)).unwrap_err();
        assert!(e.contains("no /etc/passwd"), "{e}");
        let e = resolve(&req, Some(""), Some(GROUP)).unwrap_err();
        assert!(e.contains("\"www-data\""), "{e}");
    }

    #[test]
    fn malformed_image_users() {
        for bad in ["a:b:c", ":1000", "1000:", "99999999999", "4294967295"] {
            assert!(resolve_image(bad).is_err(), "{bad}");
        }
        // Above runc's limit but a u32.
        let e = resolve_image("3000000000").unwrap_err();
        assert!(e.contains("2147483647"), "{e}");
    }

    #[test]
    fn run_as_user_wins_over_the_image() {
        let req = UserRequest {
            run_as_user: Some(1000),
            image_user: "www-data:1004".into(),
            ..UserRequest::default()
        };
        let r = resolve(&req, Some(PASSWD), Some(GROUP)).unwrap();
        assert_eq!((r.uid, r.gid), (1000, 1000));
        assert_eq!(r.additional_gids, [10, 50000, 1004]);
    }

    #[test]
    fn run_as_user_wins_over_run_as_username() {
        let req = UserRequest {
            run_as_user: Some(1002),
            run_as_username: Some("www-data".into()),
            ..UserRequest::default()
        };
        let r = resolve(&req, Some(PASSWD), Some(GROUP)).unwrap();
        assert_eq!((r.uid, r.gid), (1002, 0));
    }

    #[test]
    fn run_as_username_wins_over_the_image() {
        let req = UserRequest {
            run_as_username: Some("www-data".into()),
            image_user: "1000".into(),
            ..UserRequest::default()
        };
        let r = resolve(&req, Some(PASSWD), Some(GROUP)).unwrap();
        assert_eq!((r.uid, r.gid), (33, 33));
        let req = UserRequest {
            run_as_username: Some("ghost".into()),
            ..UserRequest::default()
        };
        let e = resolve(&req, Some(PASSWD), Some(GROUP)).unwrap_err();
        assert!(e.starts_with("run_as_username: "), "{e}");
        assert!(e.contains("\"ghost\""), "{e}");
        // An empty name is no name.
        let req = UserRequest {
            run_as_username: Some(String::new()),
            image_user: "1002".into(),
            ..UserRequest::default()
        };
        assert_eq!(resolve(&req, Some(PASSWD), Some(GROUP)).unwrap().uid, 1002);
    }

    #[test]
    fn run_as_group_sets_the_primary_gid() {
        let req = UserRequest {
            run_as_user: Some(1000),
            run_as_group: Some(50000),
            ..UserRequest::default()
        };
        let r = resolve(&req, Some(PASSWD), Some(GROUP)).unwrap();
        assert_eq!((r.uid, r.gid), (1000, 50000));
        assert_eq!(r.additional_gids, [10, 1004]);
        let req = UserRequest {
            run_as_username: Some("www-data".into()),
            run_as_group: Some(7),
            image_user: "1000:1000".into(),
            ..UserRequest::default()
        };
        let r = resolve(&req, Some(PASSWD), Some(GROUP)).unwrap();
        assert_eq!((r.uid, r.gid), (33, 7));
    }

    #[test]
    fn run_as_group_alone_is_an_error() {
        let req = UserRequest {
            run_as_group: Some(1000),
            image_user: "1000".into(),
            ..UserRequest::default()
        };
        assert_eq!(
            resolve(&req, Some(PASSWD), Some(GROUP)).unwrap_err(),
            "run_as_group requires run_as_user or run_as_username"
        );
    }

    #[test]
    fn supplemental_groups_follow_without_duplicates_or_primary() {
        let req = UserRequest {
            run_as_user: Some(1000),
            supplemental_groups: vec![5, 50000, 1000, 5, 6],
            ..UserRequest::default()
        };
        let r = resolve(&req, Some(PASSWD), Some(GROUP)).unwrap();
        assert_eq!(r.gid, 1000);
        assert_eq!(r.additional_gids, [10, 50000, 1004, 5, 6]);
        assert_eq!(r.spec_additional_gids(), [5, 6, 10, 1000, 1004, 50000]);
    }

    #[test]
    fn strict_groups_leave_the_images_memberships_out() {
        let req = UserRequest {
            run_as_user: Some(1000),
            supplemental_groups: vec![1234],
            strict_groups: true,
            ..UserRequest::default()
        };
        let r = resolve(&req, Some(PASSWD), Some(GROUP)).unwrap();
        assert_eq!(
            (r.uid, r.gid),
            (1000, 1000),
            "the primary gid still from passwd"
        );
        assert_eq!(r.spec_additional_gids(), [1000, 1234]);
    }

    #[test]
    fn ids_above_runcs_limit_are_errors() {
        let req = UserRequest {
            run_as_user: Some(u32::MAX),
            ..UserRequest::default()
        };
        assert!(resolve(&req, None, None)
            .unwrap_err()
            .starts_with("run_as_user: "));
        let req = UserRequest {
            run_as_user: Some(1),
            run_as_group: Some(1 << 31),
            ..UserRequest::default()
        };
        assert!(resolve(&req, None, None)
            .unwrap_err()
            .starts_with("run_as_group: "));
        let req = UserRequest {
            supplemental_groups: vec![1, 1 << 31],
            ..UserRequest::default()
        };
        let e = resolve(&req, None, None).unwrap_err();
        assert!(e.starts_with("supplemental_groups[1]: "), "{e}");
    }

    #[test]
    fn parsers_skip_what_they_cannot_read() {
        let users = parse_passwd(PASSWD);
        let names: Vec<&str> = users.iter().map(|u| u.name).collect();
        assert_eq!(names, ["root", "daemon", "www-data", "user1", "nohome"]);
        assert_eq!(users[4].home, "");
        let groups = parse_group(GROUP);
        let names: Vec<&str> = groups.iter().map(|g| g.name).collect();
        assert_eq!(
            names,
            ["root", "daemon", "wheel", "www-data", "user1", "group1", "web"]
        );
        assert_eq!(groups[6].members, ["www-data", "user1"]);
        assert!(groups[1].members.is_empty());
        // CRLF files and a group line without the member field.
        let g = parse_group("a:x:5\r\nb:x:6:u\r\n");
        assert_eq!(g.len(), 2);
        assert_eq!(g[1].members, ["u"]);
    }

    #[test]
    fn ids_from_the_image_above_runcs_limit() {
        let passwd = "big:x:3000000000:1::/:/bin/sh\nbiggid:x:5:3000000000::/:/bin/sh\n";
        let group = "huge:x:3000000001:biggid\n";
        let req = |user: &str| UserRequest {
            image_user: user.into(),
            ..UserRequest::default()
        };
        let e = resolve(&req("big"), Some(passwd), Some(group)).unwrap_err();
        assert!(e.contains("uid 3000000000"), "{e}");
        let e = resolve(&req("biggid"), Some(passwd), Some(group)).unwrap_err();
        assert!(e.contains("gid 3000000000"), "{e}");
        // A huge group is no membership.
        let r = resolve(&req("biggid:7"), Some(passwd), Some(group)).unwrap();
        assert_eq!((r.uid, r.gid), (5, 7));
        assert!(r.additional_gids.is_empty());
    }

    #[test]
    fn first_entry_wins() {
        let passwd = "dup:x:2000:2000::/a:/bin/sh\ndup:x:3000:3000::/b:/bin/sh\n";
        let req = UserRequest {
            image_user: "dup".into(),
            ..UserRequest::default()
        };
        let r = resolve(&req, Some(passwd), None).unwrap();
        assert_eq!((r.uid, r.gid, r.home.as_deref()), (2000, 2000, Some("/a")));
    }

    #[test]
    fn user_without_home_and_own_named_group() {
        let group = "nohome:x:1001:nohome\nextra:x:3000:nohome\n";
        let req = UserRequest {
            image_user: "nohome".into(),
            ..UserRequest::default()
        };
        let r = resolve(&req, Some(PASSWD), Some(group)).unwrap();
        assert_eq!((r.uid, r.gid), (1001, 1001));
        assert_eq!(r.home, None);
        assert_eq!(r.additional_gids, [3000]);
    }
}

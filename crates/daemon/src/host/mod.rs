//! The node beneath the pods, as the daemon reaches it: the host's mount
//! namespace, where the daemon's own sandbox cannot go (`hostns`), user
//! namespaces with id maps (`idmap`), the clone both run their few system
//! calls in (`clone`), what each runtime handler and the kernel can do
//! (`features`), AppArmor (`apparmor`), the cgroup layout
//! (`cgroup_layout`) and the CDI spec directories (`cdi`).

pub mod apparmor;
pub mod cdi;
pub mod cgroup_layout;
pub mod clone;
pub mod features;
pub mod hostns;
pub mod idmap;

//! Network namespaces and veth pairs (being written).

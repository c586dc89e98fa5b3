//! FAC² — written by the FAC² work item.

#if canImport(Glibc)
package import Glibc

/// Descriptors for `posix_spawn`: what the child must not inherit.
package enum SpawnFileActions {
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// glibc 2.34+; Swift's Glibc module does not export it (it needs _GNU_SOURCE), hence the lookup.
    private static let addCloseFrom: AddCloseFrom? = dlsym(
        nil,
        "posix_spawn_file_actions_addclosefrom_np"
    ).map { unsafeBitCast($0, to: AddCloseFrom.self) }

    /// Adds actions that close every descriptor from `first` (3 unless the child is handed more) up in the
    /// child.
    ///
    /// Why it matters: Foundation's `Process` learns that a child ended when the last copy of a socket
    /// the child holds is closed. A child spawned with `posix_spawn` at that moment from another thread
    /// inherits the socket; if it outlives the first (a database server started by `pg_ctl`, a detached
    /// daemon), the first child's end is never seen and `isRunning` stays true. A whole CI run failed on
    /// exactly that.
    package static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t, from first: Int32 = 3) {
        if let addCloseFrom, addCloseFrom(&actions, first) == 0 { return }
        // Older glibc: close what is open now, one action each (a close of a descriptor that is gone
        // by the spawn is ignored by glibc).
        guard let directory = opendir("/proc/self/fd") else { return }
        defer { closedir(directory) }
        let own = dirfd(directory)
        while let entry = readdir(directory) {
            // Read the name through its address: copying `d_name` (256 bytes) reads past the end of
            // readdir's buffer when the entry is its last, Foundation's own SIGSEGV (see SpawnedProcess).
            let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
            let name = String(cString: (UnsafeRawPointer(entry) + nameOffset).assumingMemoryBound(to: CChar.self))
            guard let descriptor = Int32(name), descriptor >= first, descriptor != own else { continue }
            posix_spawn_file_actions_addclose(&actions, descriptor)
        }
    }
}
#endif

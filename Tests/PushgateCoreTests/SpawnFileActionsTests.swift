import Foundation
import PushgateCore
import Testing

#if canImport(Glibc)
import Glibc

@Suite("posix_spawn: a child inherits none of our descriptors")
struct SpawnFileActionsTests {
    /// The descriptors a shell spawned with `actions` holds, as it lists them itself.
    static func descriptorsOfChild(closingInherited: Bool) throws -> Set<Int32> {
        let output = FileManager.default.temporaryDirectory
            .appendingPathComponent("spawn-fds-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if closingInherited { SpawnFileActions.closeInheritedDescriptors(&actions) }
        // `ls` of the shell's own table, written by the shell (before `ls` opens anything of its own).
        let command = "cd /proc/$$/fd && echo * > '\(output)'"
        let words: [String] = ["/bin/sh", "-c", command]
        let argv = words.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        #expect(posix_spawn(&pid, "/bin/sh", &actions, nil, argv, environ) == 0)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1, errno == EINTR {}
        let listed = try String(contentsOfFile: output, encoding: .utf8)
        return Set(listed.split(whereSeparator: \.isWhitespace).compactMap { Int32($0) })
    }

    @Test("a descriptor open here without CLOEXEC is closed in the child, the standard three stay")
    func inheritedDescriptorIsClosed() throws {
        var pipeEnds: [Int32] = [0, 0]
        #expect(pipe(&pipeEnds) == 0)
        // Moved high, clear of the descriptor the child's shell opens to read its own table.
        let ends = pipeEnds.map { fcntl($0, F_DUPFD, 300) }
        for end in pipeEnds { close(end) }
        defer { for end in ends { close(end) } }
        #expect(ends.allSatisfy { $0 >= 300 })
        // The control: without the actions the child does hold the pipe (so the check below can fail).
        let plain = try Self.descriptorsOfChild(closingInherited: false)
        #expect(plain.isSuperset(of: ends))
        let closed = try Self.descriptorsOfChild(closingInherited: true)
        #expect(closed.isDisjoint(with: ends))
        #expect(closed.isSuperset(of: [0, 1, 2]))
    }
}
#endif

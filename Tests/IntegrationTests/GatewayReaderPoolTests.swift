import Foundation
import PushgateGateway
import Testing

#if os(Linux)
/// The gateway opens its SQLite store's whole reader pool at the start, so that its descriptors and threads do
/// not step up hours later, when a busier moment first needs one more reader (the soak judges them flat).
@Suite("Gateway: the SQLite reader pool is open from the start", .timeLimit(.minutes(2)))
struct GatewayReaderPoolTests {
    /// This process's descriptors on `path` itself (not its WAL, SHM or lock file): one per SQLite connection.
    static func descriptors(on path: String) -> Int {
        let real = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.filter { entry in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(entry)")) == real
        }.count
    }

    @Test("a started gateway holds its writer and all four readers before anything was read")
    func everyReaderOpenAtStart() async throws {
        try await GatewayFixture.with { context in
            guard case .sqlite(let path) = context.configuration.store else {
                Issue.record("the fixture's gateway runs on SQLite")
                return
            }
            #expect(Self.descriptors(on: path) == 1 + 4)
        }
    }
}
#endif

import PushgateCore
import Testing

@Suite("Request completion: when a request is done, decided once for both stores")
struct RequestCompletionTests {
    typealias Code = StoredForm.RequestStateCode

    static func completion(
        _ state: Code = .sending,
        cutDone: Bool = true,
        openChunks: Bool = false,
        retries: Bool = false
    ) -> RequestCompletion {
        RequestCompletion(
            state: state.rawValue,
            cutDone: cutDone,
            hasOpenChunks: openChunks,
            hasPendingRetries: retries
        )
    }

    @Test("a request whose targets are all cut, with no open chunk and no pending retry, is done")
    func complete() {
        #expect(Self.completion(.sending).finalState == .done)
        #expect(Self.completion(.queued).finalState == .done)
    }

    @Test("an uncut target, an open chunk or a pending retry keeps the request going")
    func outstanding() {
        #expect(Self.completion(cutDone: false).finalState == nil)
        #expect(Self.completion(openChunks: true).finalState == nil)
        #expect(Self.completion(retries: true).finalState == nil)
        #expect(Self.completion(cutDone: false, openChunks: true, retries: true).finalState == nil)
    }

    @Test("a request finished already (done or expired) is not finished again")
    func finished() {
        #expect(Self.completion(.done).finalState == nil)
        #expect(Self.completion(.expired).finalState == nil)
    }
}

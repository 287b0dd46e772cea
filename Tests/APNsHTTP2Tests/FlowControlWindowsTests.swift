import Testing

@testable import APNsHTTP2
@testable import PushTransport

@Suite("Flow-control windows (connection-wide, as a value)")
struct FlowControlWindowsTests {
    @Test("sending is bounded by the connection window, the stream's window and the frame size")
    func sendableIsTheSmallestBound() throws {
        var windows = FlowControlWindows()
        #expect(windows.sendable(100_000, streamWindow: 1_000_000) == 16_384, "frame size")
        windows.peerMaximumFrameSize = 1 << 20
        #expect(windows.sendable(100_000, streamWindow: 1_000_000) == 65_535, "connection window")
        #expect(windows.sendable(100_000, streamWindow: 10) == 10, "stream window")
        windows.sent(65_535)
        #expect(windows.sendable(1, streamWindow: 10) == 0)
        try windows.connectionWindowUpdate(5)
        #expect(windows.sendable(100, streamWindow: 100) == 5)
        #expect(throws: HTTP2ConnectionError.self) { try windows.connectionWindowUpdate(UInt32(Int32.max)) }
    }

    @Test("a new initial window moves every stream by the difference; received bytes are acknowledged in bulk")
    func initialWindowAndAcknowledgements() {
        var windows = FlowControlWindows()
        #expect(windows.initialStreamWindowChanged(to: 10) == 10 - 65_535)
        #expect(windows.initialStreamSend == 10)
        windows.received(32_767)
        #expect(windows.takeAcknowledgement() == nil)
        windows.received(1)
        #expect(windows.takeAcknowledgement() == 32_768)
        #expect(windows.takeAcknowledgement() == nil, "acknowledged once")
    }
}

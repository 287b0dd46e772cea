import Foundation
import PushTransport
import PushgateCore
import PushgateDispatch
import Testing

/// The dispatcher's in-flight budget is what its transports can carry, read as it changes.
@Suite("Dispatcher: the in-flight budget follows the transport", .timeLimit(.minutes(2)))
struct InFlightBudgetTests {
    @Test("the budget grows and shrinks with the transport's capacity; it is never exceeded")
    func followsCapacityChanges() async throws {
        try await DispatcherPipelineTests.withBroadcast(
            devices: 600,
            chunkSize: 600,
            pageSize: 50,
            capacity: 100,
            maximumInFlight: nil
        ) { transport, store, id in
            try await eventually("the first budget is filled") { transport.submitted == 100 }
            transport.inFlightCapacity = 250
            transport.answerAll()
            // 100 answered: the new budget, 250, is filled at once.
            try await eventually("the grown budget is filled") { transport.submitted == 350 }
            #expect(transport.held == 250)
            transport.inFlightCapacity = 50
            transport.answerAll()
            try await eventually("the shrunk budget is filled") { transport.submitted == 400 }
            #expect(transport.held == 50)
            while transport.submitted < 600 || transport.held > 0 {
                transport.answerAll()
                try await eventually("more sent or all answered") { transport.held > 0 || transport.submitted == 600 }
                if transport.submitted == 600 { transport.answerAll() }
            }
            try await eventually("request done") { try await store.report(id)?.state == .done }
            #expect(!transport.capacityExceeded)
        }
    }

    @Test("a configured cap bounds the budget below the transports' capacity")
    func configuredCap() async throws {
        try await DispatcherPipelineTests.withBroadcast(
            devices: 300,
            chunkSize: 300,
            pageSize: 50,
            capacity: 1_000,
            maximumInFlight: 40
        ) { transport, store, id in
            try await eventually("the capped budget is filled") { transport.submitted == 40 }
            transport.answerAll()
            try await eventually("the next 40 sent") { transport.submitted == 80 }
            #expect(transport.held == 40)
        }
    }
}

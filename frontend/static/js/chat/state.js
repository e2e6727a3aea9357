// The chat page's elements and shared state, looked up once.
export const root = document.querySelector("[data-chat]");

export const page = {
  graphUrl: root.dataset.graphUrl,
  deletionsUrl: root.dataset.deletionsUrl,
  threadList: root.querySelector("[data-thread-list]"),
  messageList: root.querySelector("[data-messages]"),
  loadEarlier: root.querySelector("[data-load-earlier]"),
  scroller: root.querySelector("[data-scroll]"),
  emptyState: root.querySelector("[data-empty]"),
  title: root.querySelector("[data-thread-title]"),
  renameButton: root.querySelector("[data-rename]"),
  renameForm: root.querySelector("[data-rename-form]"),
  composer: root.querySelector("[data-composer]"),
  threadsPanel: root.querySelector("[data-threads-panel]"),
  threadsToggle: root.querySelector("[data-threads-toggle]"),
};
page.renameInput = page.renameForm.querySelector("input");
page.input = page.composer.querySelector("textarea");
page.sendButton = page.composer.querySelector("[data-send]");

export const state = {
  threads: [],
  thread: null,
  // The URL of the page of messages before the oldest shown (null: all shown), and its load in flight.
  olderUrl: null,
  loadingOlder: null,
  // id -> Message, for the seq numbers and snippets of "used memory" chips.
  known: new Map(),
  // turn id -> followTurn handle, for the turns streaming into this thread.
  follows: new Map(),
};

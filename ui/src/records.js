// Rebuilds a RunTimeline from a bundle's journal records (stub until the
// bundle inspector lands).
export function timelineFromRecords(records, manifest) {
  return { run_id: manifest?.run_id || '', session_id: manifest?.session_id || '', status: 'completed',
    created_at: '', updated_at: '', lanes: [], attempts: [], marks: [] };
}

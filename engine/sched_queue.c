/*
 * sched_queue.c - the scheduler's queues: two queues of batches with
 * slots to make (demand: opened by a reader, first; ahead: readahead),
 * where a slot's sample goes, and a batch whose slots are all done
 * (see engine.h).  Layer: the engine (engine/), below batch.c, relaxed.c
 * and sched.c's workers, above order.c and budget.c.  Every function is
 * called with feed.lock held.
 */
#include <stdatomic.h>

#include "engine/engine.h"

static void
q_push(struct queue *q, struct batch *b)
{
	b->qnext = NULL;
	if (q->tail)
		q->tail->qnext = b;
	else
		q->head = b;
	q->tail = b;
}

static void
q_remove(struct queue *q, struct batch *b)
{
	struct batch **pp = &q->head, *prev = NULL;

	for (; *pp; prev = *pp, pp = &(*pp)->qnext) {
		if (*pp != b)
			continue;
		*pp = b->qnext;
		if (q->tail == b)
			q->tail = prev;
		b->qnext = NULL;
		return;
	}
}

/* Queue b's slots not handed out yet (quota - next).  Locked. */
void
sched_enqueue(struct feed *f, struct batch *b)
{
	b->queued = true;
	f->queued_slots += b->r.quota - b->next;
	q_push(b->demanded ? &f->demand : &f->ahead, b);
	pthread_cond_broadcast(&f->work);
}

void
sched_dequeue(struct feed *f, struct batch *b)
{
	if (b->mixq) {
		q_remove(&f->mix, b);
		b->mixq = false;
	}
	if (!b->queued)
		return;
	q_remove(b->demanded ? &f->demand : &f->ahead, b);
	b->queued = false;
}

void
sched_demand(struct feed *f, struct batch *b)
{
	if (b->demanded)
		return;
	if (b->queued) {
		q_remove(&f->ahead, b);
		q_push(&f->demand, b);
	}
	b->demanded = true;
	pthread_cond_broadcast(&f->work);
}

uint8_t *
sched_slot(struct batch *b, uint32_t s)
{
	const struct job *j = b->job;
	const struct job_geo *geo = job_geo(j, b->key.epoch);

	if (j->cfg->gpu)
		return b->raw + (size_t)s * geo->raw_bytes;
	return b->file[BK_IMAGES] + b->g.hdr[BK_IMAGES] +
	       (size_t)s * geo->sample_bytes;
}

void
sched_ready(struct feed *f, struct batch *b)
{
	b->ready = true;
	order_put(b->order);
	b->order = NULL;
	atomic_fetch_add(
	    b->err ? &b->job->st.batch_errors : &b->job->st.batches, 1);
	pthread_cond_broadcast(&b->cv);
	budget_wake(&f->budget);
	if (b->refs == 0 && budget_over(&f->budget))
		budget_make_room(&f->budget, 0, 0, 0);
}

void
sched_complete(struct feed *f, struct batch *b)
{
	if (b->err || !job_float_labels(b->job)) {
		sched_ready(f, b);
		return;
	}
	sched_dequeue(f, b); /* out of the work queues already: qnext is free */
	b->mixq = true;
	q_push(&f->mix, b);
	pthread_cond_broadcast(&f->work);
}
